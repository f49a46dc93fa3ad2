"""The tiny_gdn_words_lengths preset through `python -m memexp run`: a short Plain / NoteBank-TF
run on every push, the README's six-task figures in the slow run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}


def run_preset(out: Path, method: str, *overrides: str) -> dict:
    """summary.json of one run of the preset."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "memexp", "run", "experiment=tiny_gdn_words_lengths", f"method={method}",
           "logger=none", f"output_dir={out}", f"bench.cache_dir={out / 'cache'}", "progress=false", *overrides]
    result = subprocess.run(cmd, cwd=out, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    (summary,) = (out / "ruler").glob("*/*/*/summary.json")
    return json.loads(summary.read_text())


def mean_at(summary: dict, length: int) -> float:
    per_task = [scores[str(length)] for scores in summary["scores"].values()]
    return sum(per_task) / len(per_task)


def test_short_comparison_plain_and_notebank(tmp_path):
    # at 16x the training length Plain has forgotten the needle (0 of 10 on seed 42 in the README
    # table) and NoteBank-TF's native router brings it back (8 of 10): 3 examples must show it
    short = ("bench.tasks=[niah_single_1]", "bench.lengths=[16384]", "bench.num_samples=3")
    plain = run_preset(tmp_path / "plain", "plain", *short)
    notebank = run_preset(tmp_path / "notebank", "notebank", *short)
    assert mean_at(notebank, 16384) > mean_at(plain, 16384)
    (records,) = (tmp_path / "notebank" / "ruler").glob("*/*/*/records.jsonl")
    for line in records.read_text().splitlines():
        record = json.loads(line)
        assert record["method_stats"]["router"] == "native" and record["method_stats"]["selected"]


@pytest.mark.slow
def test_the_readme_six_task_figures(tmp_path):
    lengths = "bench.lengths=[1024,16384]"
    plain = run_preset(tmp_path / "plain", "plain", lengths, "bench.num_samples=5")
    notebank = run_preset(tmp_path / "notebank", "notebank", lengths, "bench.num_samples=5")
    assert mean_at(notebank, 16384) >= mean_at(plain, 16384) + 10  # README: 24.6 vs 3.3 on 10 examples
    assert set(plain["scores"]) == {"niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
                                    "niah_multiquery", "niah_multivalue"}
