"""Every CUDA path of memexp checked and measured in one command on a GPU machine, under one budget.

    bash scripts/check/gpu_check.sh OUT_DIR            # offline: installs from .wheelhouse/, then this
    python scripts/check/gpu_check.py --out OUT_DIR    # memexp and its kernels already installed

Steps, one after another, each a process under its own time limit cut from one total budget
(default 480 s): the compile preflight (scripts/check/gpu_preflight.py: every dispatched Triton kernel
compiled for sm_80 and sm_90 at the 1.3B shapes, its table first in the report), the environment
(which kernel library serves each op), every dispatched kernel
against memexp's reference op at the 1.3B checkpoints' shapes, the real-size configurations with
random weights (CUDA bf16 against CPU fp32), routing at 4,096 notes, NoteBank's Table 7 protocol
(its lengths adapt to its limit), Titan-Llama's prefill and decode (Fig. 4), the quick start, and
the CUDA tests (`pytest -m gpu` on the files that hold them) with what is left;
scripts/check/gpu_measure.py has each measurement. A step that passes
its limit is killed with its whole process group and recorded as timed out with what it printed so
far; the report (OUT_DIR/report.md, the first file written) is rewritten after every step, so it
holds every finished figure even when the run is cut short. OUT_DIR gets at most two files:
report.md and install.log. Steps run in a scratch folder, so `memexp` is the installed one, not the
checkout's. On a machine where torch sees no CUDA device it prints one line and exits 2, writing
nothing.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KEEP_LINES = 300  # of each step's output in the report (a failed step can print thousands)


@dataclass
class Step:
    name: str
    cmd: list[str]
    cap: float | None = None  # its own limit; None = all that is left of the budget
    status: str = "not run"
    seconds: float = 0.0
    output: str = ""
    notes: list[str] = field(default_factory=list)


def cuda_device() -> str | None:
    """The first CUDA device's name as torch sees it, or None."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def gpu_test_files() -> list[str]:
    """The test files and folders holding `gpu`-marked tests (a conftest's marks apply to its folder):
    only those are collected, so a test module that imports what the GPU machine lacks (wandb,
    lm-eval, datasets) cannot stop the collection."""
    found = set()
    for path in (ROOT / "tests").rglob("*.py"):
        if "pytest.mark.gpu" in path.read_text():
            found.add(path.parent if path.name == "conftest.py" else path)
    return sorted(str(p) for p in found if not any(d in p.parents for d in found))


def plan(work: Path) -> list[Step]:
    """The steps, most important first; the CUDA tests last, with whatever is left."""
    py = sys.executable
    measure = [py, str(HERE / "gpu_measure.py")]
    # first: every dispatched Triton kernel compiled for sm_80 and sm_90 at the 1.3B shapes, a table
    # (gpu_preflight.py; its full run, fp32 and the tiny configs too, is the CPU machine's)
    preflight = [py, str(HERE / "gpu_preflight.py"), "--targets", "80,90", "--backbones", "gdn,gdn2,mamba2,qwen35_9b",
                 "--dtypes", "bf16", "--no-backward", "--budget", "75"]
    return [
        Step("compile preflight (sm_80, sm_90)", preflight, 90),
        Step("environment", measure + ["env"], 30),
        Step("kernels at the 1.3B shapes", measure + ["kernels"], 90),
        Step("real-size models, random weights", measure + ["models"], 120),
        Step("routing at 4,096 notes", measure + ["routing"], 30),
        Step("NoteBank Table 7 protocol", measure + ["notebank"], 150),
        Step("Titan-Llama prefill and decode (Fig. 4)", measure + ["titan"], 90),
        Step("quick start", [py, "-m", "memexp", "run", "logger=none", "progress=false",
                             f"output_dir={work / 'runs'}"], 60),
        Step("test-gpu", [py, "-m", "pytest", "-q", "-m", "gpu", "-rs", "-p", "no:cacheprovider",
                          *gpu_test_files()]),
    ]


def run_step(step: Step, limit: float, cwd: Path, env: dict) -> None:
    """Run `step` in its own process group under `limit` seconds; fill status, time and output."""
    with tempfile.TemporaryFile(mode="w+") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(step.cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=env)
        try:
            rc = proc.wait(timeout=max(limit, 1))
            step.status = "ok" if rc == 0 else f"exit {rc}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            step.status = f"TIMED OUT after {limit:.0f} s"
        step.seconds = time.perf_counter() - t0
        log.seek(0)
        lines = log.read().splitlines()
    if len(lines) > KEEP_LINES:
        step.notes.append(f"first {len(lines) - KEEP_LINES} of {len(lines)} output lines left out")
        lines = lines[-KEEP_LINES:]
    step.output = "\n".join(lines)


def test_summary(step: Step) -> str:
    """pytest's final counts line ('3 passed, 1 skipped in 12.3s'), or the step's status."""
    counts = [ln for ln in step.output.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", ln)]
    return counts[-1].strip("= ") if counts else step.status


def header(gpu: str, budget: float) -> list[str]:
    import torch

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=20, check=False).stdout.strip() \
        if shutil.which("nvidia-smi") else "nvidia-smi not found"
    commit = os.environ.get("MEMEXP_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()
    return [f"# GPU check {datetime.datetime.now():%Y-%m-%d %H:%M}", "",
            f"- GPU: {gpu} ({smi})", f"- torch {torch.__version__}, CUDA {torch.version.cuda}, Python "
            f"{sys.version.split()[0]}", f"- memexp commit {commit or 'unknown'}",
            f"- command: `bash scripts/check/gpu_check.sh OUT_DIR` (`{' '.join(sys.argv[1:])}`), budget {budget:.0f} s",
            ""]


def report(head: list[str], steps: list[Step], install: str) -> str:
    lines = head + ["| step | status | seconds |", "|---|---|---:|"]
    lines += [f"| {s.name} | {s.status} | {s.seconds:.0f} |" for s in steps]
    tests = next((s for s in steps if s.name == "test-gpu"), None)
    if tests is not None:
        lines += ["", f"**test-gpu summary:** {test_summary(tests)}"]
    if install:
        lines += ["", f"Offline install: {install}"]
    for s in steps:
        if s.status.startswith("not run"):
            continue
        lines += ["", f"## {s.name}: {s.status}, {s.seconds:.0f} s", "", f"`{' '.join(Path(c).name if '/' in c else c for c in s.cmd)}`", ""]
        lines += [f"({note})" for note in s.notes]
        lines += ["```", s.output, "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=480.0, help="seconds for all steps together (default 480)")
    p.add_argument("--out", type=Path, required=True, help="folder of the report (created)")
    p.add_argument("--install-log", type=Path, help="the offline install's log, copied beside the report")
    p.add_argument("--only", default="", help="comma-separated words: run only the steps whose name has one")
    args = p.parse_args(argv)
    gpu = cuda_device()
    if gpu is None:
        print("gpu-check: no CUDA device visible to torch on this machine; nothing checked, nothing written")
        return 2
    deadline = time.monotonic() + args.budget
    steps = plan(Path(tempfile.mkdtemp(prefix="memexp-gpu-check-")))
    if args.only:
        steps = [s for s in steps if any(w in s.name for w in args.only.split(","))]
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "report.md"
    install = ""
    if args.install_log is not None and args.install_log.is_file():
        shutil.copy(args.install_log, args.out / "install.log")
        install = "ok, from the wheelhouse (install.log)"
    head = header(gpu, args.budget)
    path.write_text(report(head, steps, install))
    work = Path(tempfile.mkdtemp(prefix="memexp-gpu-steps-"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MEMEXP_ROOT": str(work), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    for step in steps:
        left = deadline - time.monotonic()
        limit = left if step.cap is None else min(step.cap, left)
        if left < 5:
            step.status = "not run: total budget spent"
        else:
            if "notebank" in step.cmd:
                step.cmd += ["--budget", f"{max(limit - 25, 10):.0f}"]  # its lengths adapt to this
            print(f"gpu-check: {step.name} (limit {limit:.0f} s)", flush=True)
            run_step(step, limit, work, env)
            print(f"gpu-check: {step.name}: {step.status}, {step.seconds:.0f} s", flush=True)
        path.write_text(report(head, steps, install))
    print(path.read_text())
    print(f"gpu-check: report written to {path}")
    return 0 if all(s.status == "ok" for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
