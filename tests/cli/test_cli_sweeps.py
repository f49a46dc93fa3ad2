"""Sweeps on the tiny model: a two-trial Optuna search and a two-job joblib sweep finish with
every job folder holding Hydra's overrides and a pointer to its run folder; joblib jobs share
the cores; the task function returns the configured metric."""

import json
import os
from pathlib import Path

import pytest
import yaml
from helpers.memexp_process import memexp_ok

from memexp.run.jobs import job_threads, metric_value, parallel_jobs

QUICK = ["bench.lengths=[1024]", "bench.num_samples=1", "progress=false"]


def memexp_run(args, root: Path, timeout=300, printed: list | None = None):
    out = memexp_ok("run", *args, timeout=timeout, cwd=root, env={"MEMEXP_ROOT": str(root)})
    if printed is not None:
        printed.append(out)
    (sweep,) = (root / "outputs" / "multirun").iterdir()
    return sweep


def job_folders(sweep: Path) -> list[tuple[dict, Path]]:
    """(overrides as a dict, run folder) of every numbered job folder, checked to be filled."""
    jobs = []
    for d in sorted(p for p in sweep.iterdir() if p.name.isdigit()):
        overrides = yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text())
        run = Path((d / "run_folder.txt").read_text().strip())
        assert (d / "run").resolve() == run and (run / "summary.json").is_file()
        jobs.append(({k.lstrip("+"): v for k, v in (o.split("=", 1) for o in overrides)}, run))
    return jobs


def test_optuna_two_trials_tune_R_and_B(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    sweep = memexp_run(["hparams_search=notebank_optuna", "hydra.sweeper.n_trials=2", *QUICK], tmp_path)
    jobs = job_folders(sweep)
    assert len(jobs) == 2
    overall = []
    for overrides, run in jobs:
        cfg = yaml.safe_load((run / "config.yaml").read_text())
        # the trial's suggested R and B are the ones its run used
        assert str(cfg["method"]["replay_budget"]) == overrides["method.replay_budget"]
        assert str(cfg["method"]["span_budget"]) == overrides["method.span_budget"]
        assert cfg["method"]["name"] == "notebank"
        overall.append(json.loads((run / "summary.json").read_text())["overall"])
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert best["best_value"] == max(overall)  # Optuna maximised what each task function returned


def test_joblib_two_jobs_in_parallel_share_the_cores(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweep = memexp_run(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "method=plain,notebank", *QUICK],
                       tmp_path)
    jobs = job_folders(sweep)
    assert sorted(o["method"] for o, _ in jobs) == ["notebank", "plain"]
    cores = len(os.sched_getaffinity(0))
    for overrides, run in jobs:
        assert run.parts[-2] == overrides["method"] and run.is_relative_to(tmp_path / "outputs" / "runs")
        assert yaml.safe_load((run / "config.yaml").read_text())["threads"] == max(1, cores // 2)


JOBLIB = {"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", "n_jobs": 4}
SUBMITIT_LOCAL = {"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"}
BASIC = {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"}


def test_threads_are_the_cores_shared_among_parallel_jobs(monkeypatch):
    monkeypatch.setattr("memexp.run.jobs.cores", lambda: 16)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    monkeypatch.setenv("MEMEXP_SWEEP_JOBS", "8")
    assert job_threads(None, JOBLIB) == 4  # 4 at once: 16 / 4
    assert job_threads(None, {**JOBLIB, "n_jobs": -1}) == 2  # one per core, but the sweep has 8 jobs
    assert job_threads(None, SUBMITIT_LOCAL) == 2  # every job of the sweep at once
    assert job_threads(None, BASIC) is None  # one at a time: torch's default
    assert job_threads(3, JOBLIB) == 3  # threads=3 wins
    monkeypatch.setenv("MEMEXP_SWEEP_JOBS", "2")
    assert parallel_jobs(JOBLIB, 2) == 2 and job_threads(None, JOBLIB) == 8
    assert job_threads(None, {**SUBMITIT_LOCAL, "cpus_per_task": 5}) == 5
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "6")
    assert job_threads(None, JOBLIB) == 6  # a SLURM job's own allocation


def test_metric_is_a_summary_key_or_path():
    summary = {"overall": 50.0, "by_length": {"1024": 75.0}, "aggregate/f1": 0.5, "scores": {"t": {"4096": 25.0}}}
    assert metric_value(summary, "overall") == 50.0
    assert metric_value(summary, "by_length/1024") == 75.0
    assert metric_value(summary, "aggregate/f1") == 0.5
    assert metric_value(summary, "scores/t/4096") == 25.0
    assert metric_value({"overall": None}, "overall") != metric_value({"overall": None}, "overall")  # NaN
    from memexp.core.schema import ConfigError

    with pytest.raises(ConfigError, match="metric='by_length/2048': not in the run's summary"):
        metric_value(summary, "by_length/2048")


def test_optuna_command_line_space_reaches_hydra_as_typed(tmp_path):
    """A search space given on the command line: Optuna's best parameters name the field as typed
    (no `++` twin holding another value), and each trial's overrides and config.yaml agree."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    printed = []
    sweep = memexp_run(["hparams_search=notebank_optuna", "hydra.sweeper.n_trials=2",
                        "method.replay_budget=int(interval(1,4))", "method.span_budget=16", *QUICK], tmp_path,
                       printed=printed)
    # quiet: no plugin set-up lines (alembic, which optuna imports) nor optuna's own study chatter
    assert "setup plugin" not in printed[0].stdout and "A new study created" not in printed[0].stderr
    assert "Best parameters: {'method.replay_budget': " in printed[0].stdout
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert not [k for k in best["best_params"] if k.startswith("+")], best["best_params"]
    runs = {}
    for d in sorted(p for p in sweep.iterdir() if p.name.isdigit()):
        overrides = yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text())
        assert not [o for o in overrides if o.startswith("+")], overrides
        typed = dict(o.split("=", 1) for o in overrides)
        cfg = yaml.safe_load((Path((d / "run_folder.txt").read_text().strip()) / "config.yaml").read_text())
        assert str(cfg["method"]["replay_budget"]) == typed["method.replay_budget"]
        assert cfg["method"]["span_budget"] == 16
        overall = json.loads((Path((d / "run_folder.txt").read_text().strip()) / "summary.json").read_text())["overall"]
        runs[int(typed["method.replay_budget"])] = overall
    assert best["best_params"]["method.replay_budget"] in runs
    assert best["best_value"] == runs[best["best_params"]["method.replay_budget"]]
