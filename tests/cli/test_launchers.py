"""The hydra/launcher options: SLURM job arrays and local processes through Hydra's submitit
launcher, and a clear message when that optional plugin is missing."""

import json
import subprocess

import pytest
from helpers.memexp_process import memexp

from memexp.core.compose import check_launcher
from memexp.core.paths import CONF_DIR
from memexp.core.schema import ConfigError

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")


def launcher(option: str):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=[f"hydra/launcher={option}"],
                           return_hydra_config=True).hydra.launcher
    finally:
        GlobalHydra.instance().clear()


def test_slurm_launcher_submits_resumable_jobs():
    conf = launcher("slurm")
    assert conf._target_.endswith("SlurmLauncher")
    assert conf.max_num_timeout >= 1  # a timed-out job is requeued and resumes from its records
    assert (conf.gpus_per_node, conf.tasks_per_node, conf.nodes) == (1, 1, 1)
    assert launcher("processes")._target_.endswith("LocalLauncher")
    assert launcher("local")._target_.endswith("BasicLauncher")


def test_missing_plugin_is_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith(("hydra_plugins.hydra_submitit",
                                                                  "hydra_plugins.hydra_joblib")) else real(name, *a))
    with pytest.raises(ConfigError, match=r'hydra/launcher=slurm: needs the submitit launcher, pip install -e ".\[cluster\]"'):
        check_launcher(["hydra/launcher=slurm", "method=plain"])
    with pytest.raises(ConfigError, match=r'hydra/launcher=joblib: needs the joblib launcher, pip install -e ".\[sweep\]"'):
        check_launcher(["hydra/launcher=joblib"])
    check_launcher(["hydra/launcher=local"])


def test_sweep_runs_each_job_in_its_own_process(tmp_path):
    """A 2-job sweep with hydra/launcher=processes: both runs complete, one run folder each."""
    out = memexp("run", "-m", "hydra/launcher=processes", "backbone=tiny_gdn_random", "method=plain,jrt",
                 "bench.lengths=[1024]", "bench.num_samples=2", f"output_dir={tmp_path / 'runs'}", "progress=false",
                 f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    summaries = sorted(tmp_path.glob("runs/ruler/tiny_gdn_random/*/*/summary.json"))
    assert [p.parts[-3] for p in summaries] == ["jrt", "plain"]
    assert all(json.loads(p.read_text())["num_questions"] == 2 for p in summaries)
    assert list((tmp_path / "sweep").glob(".submitit/*/*_log.out"))  # the jobs ran through submitit


def test_slurm_launcher_documents_the_fields_a_cluster_needs():
    conf = launcher("slurm")
    for field in ("gpus_per_node", "cpus_per_task", "mem_gb", "timeout_min", "account", "qos", "constraint",
                  "additional_parameters", "array_parallelism", "max_num_timeout", "partition"):
        assert field in conf
        # each field is set in slurm.yaml with a comment saying what it does
        line = next(line for line in (CONF_DIR / "hydra" / "launcher" / "slurm.yaml").read_text().splitlines()
                    if line.startswith(f"{field}:"))
        assert "#" in line, line


def test_slurm_local_is_slurm_sized_for_a_one_node_cpu_cluster():
    conf = launcher("slurm_local")
    assert conf._target_.endswith("SlurmLauncher") and conf.max_num_timeout == launcher("slurm").max_num_timeout
    assert (conf.partition, conf.gpus_per_node, conf.cpus_per_task, conf.mem_gb) == ("debug", 0, 1, None)
    assert conf.signal_delay_s < 60 <= conf.timeout_min * 60  # a one-minute limit still signals before it ends


def test_a_refused_submission_names_sbatchs_message_and_the_field_to_check():

    from submitit.core.utils import FailedJobError

    from memexp.cluster.submission import refused_submission, submission_line

    # what sbatch prints on a machine with SLURM's programs but no cluster configuration
    stderr = ("sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
              "sbatch: fatal: Could not establish a configuration source")
    try:
        try:
            raise subprocess.CalledProcessError(1, ["sbatch", "/tmp/x.sh"], stderr=stderr)
        except subprocess.CalledProcessError as e:
            raise FailedJobError(stderr) from e
    except FailedJobError as error:
        failure = refused_submission(error)
    assert submission_line(failure) == (
        "the sweep was not submitted: sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host; "
        "fatal: Could not establish a configuration source; check hydra/launcher (this machine is not a SLURM "
        "login node)")
    account = subprocess.CalledProcessError(1, ["sbatch"], stderr="sbatch: error: Batch job submission failed: "
                                                                  "Invalid account or account/partition combination specified")
    assert submission_line(account).endswith("; check hydra.launcher.account")
    assert refused_submission(FailedJobError("Job (task=0) failed during processing")) is None  # a job's own error
