"""A private one-node SLURM cluster for the cluster tests: munged with its own key and socket,
slurmctld and slurmd on free localhost ports, every config, state, spool and log file under one
folder. Each daemon runs in the foreground as our child, so stopping it is stopping that pid.

No cgroups, no accounting database: `proctrack/linuxproc`, `task/none`, `accounting_storage/none`
run as root on any Linux machine with the Debian packages (slurm-wlm, munge) installed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "sinfo", "squeue", "scontrol")
INSTALL = "apt-get install -y slurm-wlm munge"
# short enough for the tests' one-minute time limits to end jobs promptly: a killed job's processes
# get KillWait seconds between SIGTERM and SIGKILL
KILL_WAIT_S = 2
# a requeued job waits for its old credential to expire before it starts again (120 s by default)
CRED_EXPIRE_S = 5


def missing_programs() -> list[str]:
    return [p for p in (*DAEMONS, *CLIENTS) if shutil.which(p) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(folder: Path, host: str, ctld_port: int, slurmd_port: int, cpus: int, memory_mb: int) -> str:
    """The cluster's slurm.conf. `cpus` may exceed this machine's cores (config_overrides: the node
    is what the file says): the tests' one-CPU jobs then run side by side, as on a larger node."""
    return f"""\
ClusterName=memexp-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={folder}/munge.sock,cred_expire={CRED_EXPIRE_S}
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
ReturnToService=2
MpiDefault=none
KillWait={KILL_WAIT_S}
MinJobAge=600
InactiveLimit=0
SlurmdParameters=config_overrides
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=10 State=UP
PartitionName=short Nodes={host} MaxTime=2 State=UP
"""


@dataclass
class Cluster:
    """A running cluster: `env` is the environment its client commands (and memexp) need."""

    folder: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        out = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {out.stderr.strip()}")
        return out

    def node_state(self) -> str:
        """The node's state ("idle", "mixed", ...) as sinfo shows it, once per partition it is in."""
        states = set(self.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.split())
        return states.pop() if len(states) == 1 else ",".join(sorted(states))

    def queue(self, check: bool = True) -> list[tuple[str, str]]:
        """(job id, state) of every job slurmctld still lists as pending or running."""
        out = self.run("squeue", "-h", "-o", "%i %T", check=check).stdout
        return [tuple(line.split()) for line in out.splitlines() if line.strip()]

    def stop(self) -> None:
        """Cancel the jobs still queued (their job steps are slurmd's children, not ours), then stop
        each daemon we started."""
        if self.procs.get("slurmctld") is not None and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--user=root", check=False)
            deadline = time.monotonic() + 15
            while self.queue(check=False) and time.monotonic() < deadline:
                time.sleep(0.3)
        for name in reversed(DAEMONS):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace")[-2000:] if path.is_file() else "(no log)"


def start(folder: Path, cpus: int, memory_mb: int = 2048, ready_s: float = 60) -> Cluster:
    """Start munged, slurmctld and slurmd under `folder` and wait until `sinfo` shows the node idle."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)  # munged refuses a socket or key in a folder others may write
    for sub in ("state", "spool"):
        (folder / sub).mkdir(exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    host = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, host, free_port(), free_port(), cpus, memory_mb))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = Cluster(folder, env)
    commands = {
        "munged": ["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={folder}/munge.sock",
                   f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
                   f"--seed-file={folder}/munged.seed"],
        "slurmctld": ["slurmctld", "-D", "-i", "-f", str(conf)],  # -i: no state from an earlier start
        "slurmd": ["slurmd", "-D", "-f", str(conf), "-N", host],
    }
    try:
        for name, command in commands.items():
            with open(folder / f"{name}.out", "w") as out:
                cluster.procs[name] = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                                       stdin=subprocess.DEVNULL)
            if name == "munged":
                _wait(lambda: (folder / "munge.sock").exists(), 10, "munged's socket", cluster, name)
        _wait(lambda: cluster.node_state() == "idle", ready_s, "the node to be idle", cluster, "slurmctld")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait(ready, timeout_s: float, what: str, cluster: Cluster, log: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}) while waiting for {what}: "
                                   f"{(cluster.folder / f'{name}.out').read_text()[-1500:]} {cluster.log(name)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}: {cluster.log(log)}")
        time.sleep(0.3)
