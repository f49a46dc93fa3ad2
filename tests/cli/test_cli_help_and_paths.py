"""Every command answers --help with its fields and an example; `ls` offers the launchers; one
root (paths.root, $MEMEXP_ROOT) holds runs, sweeps and caches without changing run-folder names."""

from pathlib import Path

import pytest
from helpers.memexp_process import memexp_printed

from memexp.cli.main import COMMANDS
from memexp.core.compose import load_config
from memexp.core.paths import rebase_cache
from memexp.run.records import run_folder

FIELDS = {"run": "max_examples", "train": "stages.0.steps", "cost": "question_tokens=N", "latency": "repeats=N",
          "data": "bench:", "ls": "memexp ls", "report": "--markdown", "dashboard": "--entity",
          "lm-eval": "--model_args", "browse": "--where", "convert": "mamba2-megatron", "status": "SWEEP_FOLDER"}


def cli(argv):
    rc, out, _ = memexp_printed(argv)
    return rc, out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_lists_fields_and_an_example(command):
    rc, out = cli([command, "--help"])
    assert rc == 0
    assert FIELDS[command] in out
    assert command == "report" or "Example" in out


def test_ls_offers_every_launcher():
    rc, out = cli(["ls"])
    assert rc == 0
    line = next(line for line in out.splitlines() if line.startswith("hydra/launcher:"))
    assert line == "hydra/launcher: joblib, local, processes, slurm, slurm_local"
    assert "hparams_search: notebank_optuna" in out


def test_root_moves_runs_and_sweeps_but_not_run_folder_names(monkeypatch, tmp_path):
    default = load_config([])
    assert default.output_dir == "./outputs/runs"
    monkeypatch.setenv("MEMEXP_ROOT", str(tmp_path))
    moved = load_config([])
    assert moved.output_dir == f"{tmp_path}/outputs/runs"
    assert run_folder(moved) == tmp_path / run_folder(default)  # same name, under the root
    assert load_config([f"paths.root={tmp_path / 'x'}"]).output_dir == f"{tmp_path / 'x'}/outputs/runs"


def test_relative_caches_live_under_the_root(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMEXP_ROOT", str(tmp_path))
    bench = load_config([]).bench
    assert bench.cache_dir == "outputs/cache/ruler"  # as hashed: the same on every machine
    assert Path(rebase_cache(bench).cache_dir) == tmp_path / "outputs" / "cache" / "ruler"
    absolute = load_config([f"bench.cache_dir={tmp_path / 'c'}"]).bench
    assert rebase_cache(absolute).cache_dir == str(tmp_path / "c")


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`python -m memexp ls | head -1`: the pipe closes after one line; memexp exits 0, silently."""
    import subprocess

    from helpers.memexp_process import popen

    p = popen("ls", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and "Traceback" not in err, err


def test_run_help_lists_only_the_groups_a_user_chooses():
    rc, out = cli(["run", "--help"])
    assert rc == 0
    groups = out.split("== Config groups (group=option) ==")[1].split("==")[0]
    names = [line.split(":")[0] for line in groups.strip().splitlines()]
    assert names == ["backbone", "method", "bench", "logger", "experiment", "hparams_search", "paths",
                     "hydra/launcher"]
    assert ".paper" not in groups and "schema" not in groups and "method_for_backbone" not in groups
    assert "experiment: paper_budgets_gdn, " in groups
