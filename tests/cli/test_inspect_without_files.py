"""`--cfg`, `--info` and `-sc` show a preset before its checkpoints or data exist (issue 42): they
validate values only, and the run itself still stops with one line naming the missing file.

Every test runs in an empty folder, so no `./checkpoints/...` a preset names can exist."""

import os

import pytest
import yaml
from helpers.memexp_process import memexp_printed

from memexp.core.compose import group_options

PRESETS = group_options("experiment")


cli = memexp_printed  # (exit code, stdout, stderr) of `python -m memexp <argv>`, in this process


@pytest.fixture(autouse=True)
def empty_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMEXP_ROOT", raising=False)
    return tmp_path


def test_there_are_presets_to_check():
    assert "paper_memoryagentbench_mamba2_8b" in PRESETS and "titan_quality" in PRESETS and len(PRESETS) > 40


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_composes_with_cfg_job_and_no_checkpoints(preset, empty_folder):
    rc, out, err = cli(["run", f"experiment={preset}", "--cfg", "job"])
    assert rc == 0, err
    cfg = yaml.safe_load(out)
    assert {"backbone", "method", "bench"} <= set(cfg)
    assert os.listdir(empty_folder) == []  # nothing written: no run, cache or output folder


def test_a_local_checkpoint_that_does_not_exist_is_shown_by_cfg_and_info_and_stops_the_run():
    preset = "experiment=paper_memoryagentbench_mamba2_8b"
    rc, out, err = cli(["run", preset, "--cfg", "job"])
    assert rc == 0 and yaml.safe_load(out)["backbone"]["pretrained"] == "./checkpoints/mamba2-8b-3t-4k"
    rc, out, err = cli(["run", preset, "--info", "config"])
    assert rc == 0 and "mamba2-8b-3t-4k" in out
    rc, out, err = cli(["run", preset, "max_examples=1"])
    assert rc == 2
    assert err.strip() == "memexp: backbone.pretrained='./checkpoints/mamba2-8b-3t-4k': no such file or directory"


def test_missing_method_and_bench_files_are_checked_when_the_run_starts_only():
    missing = ["experiment=titan_quality", "method.memory_path=./modules/titan", "backbone.tokenizer=./tok"]
    rc, out, _ = cli(["run", *missing, "--cfg", "job"])
    assert rc == 0 and yaml.safe_load(out)["method"]["memory_path"] == "./modules/titan"
    rc, _, err = cli(["run", *missing, "max_examples=1"])
    assert rc == 2 and "no such file or directory" in err and len(err.strip().splitlines()) == 1


def test_a_wrong_value_still_stops_cfg_with_one_line():
    rc, _, err = cli(["run", "experiment=titan_quality", "method.segment_length=0", "--cfg", "job"])
    assert rc == 2 and err.strip().startswith("memexp: method.segment_length=0")


def test_shell_completion_of_a_preset_without_checkpoints(monkeypatch):
    monkeypatch.setenv("COMP_LINE", "memexp run experiment=paper_memoryagentbench_mamba2_8b backbone.pre")
    rc, out, err = cli(["run", "-sc", "query=bash"])
    assert rc == 0 and "backbone.pretrained=" in out
