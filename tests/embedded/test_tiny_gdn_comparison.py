"""The tiny_gdn_lengths preset through `python -m memexp run`: a short run on every push, the
README's claims in the slow run."""

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
    cmd = [sys.executable, "-m", "memexp", "run", "experiment=tiny_gdn_lengths", f"method={method}", "logger=none",
           f"output_dir={out}", f"bench.cache_dir={out / 'cache'}", "progress=false", *overrides]
    result = subprocess.run(cmd, cwd=out, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    (summary,) = (out / "ruler").glob("*/*/*/summary.json")
    return json.loads(summary.read_text())


def scores(summary: dict) -> dict[int, float]:
    return {int(k): v for k, v in summary["scores"]["niah_single_1"].items()}


def test_short_comparison_plain_and_notebank(tmp_path):
    lengths = "bench.lengths=[1024,16384]"
    plain = scores(run_preset(tmp_path / "plain", "plain", lengths, "bench.num_samples=8"))
    notebank = scores(run_preset(tmp_path / "notebank", "notebank", lengths, "bench.num_samples=8"))
    assert plain[1024] >= 75
    assert notebank[16384] >= plain[16384] + 40


@pytest.mark.slow
def test_the_readme_claims_hold(tmp_path):
    plain = scores(run_preset(tmp_path / "plain", "plain"))
    notebank = scores(run_preset(tmp_path / "notebank", "notebank"))
    assert plain[1024] >= 90
    assert plain[16384] <= 50
    assert notebank[16384] >= plain[16384] + 40
