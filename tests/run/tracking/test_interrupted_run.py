"""A run interrupted mid-way (Ctrl-C) leaves its W&B run marked incomplete, with the questions
recorded so far in the table, and the interrupt still reaches the caller."""

import pytest
from offline_run import offline_runs

import memexp.run.runner as runner
from memexp.benchmarks.base import Benchmark
from memexp.core.compose import load_config
from memexp.core.types import Example, Question


class InterruptedAfterOne(Benchmark):
    """Two one-question examples; scoring the second is the Ctrl-C."""

    name = "fake"

    def examples(self, tokenizer):
        for i in range(2):
            q = Question(id="0", prompt=f" Q{i}?", references=["x"], metric="m", max_new_tokens=2)
            yield Example(id=f"ex{i}", task="t", length=64, context="Some context.", questions=[q])

    def num_examples(self):
        return 2

    def score(self, prediction, question):
        if question.prompt == " Q1?":
            raise KeyboardInterrupt
        return 50.0


def test_an_interrupted_run_is_marked_incomplete(tmp_path, monkeypatch):
    for key in ("DIR", "DATA_DIR", "CACHE_DIR", "CONFIG_DIR"):
        monkeypatch.setenv(f"WANDB_{key}", str(tmp_path / key))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setattr(runner, "build_benchmark", lambda cfg: InterruptedAfterOne())
    cfg = load_config(["backbone=tiny_gdn_random", "method=plain", "logger=wandb", f"output_dir={tmp_path}",
                       "progress=false"])
    with pytest.raises(KeyboardInterrupt):
        runner.run(cfg)
    (run,) = offline_runs(tmp_path)
    assert "incomplete" in run.tags and run.summary["memexp/complete"] is False
    table = run.table(f"{cfg.bench.name}/records")
    assert [row[:2] for row in table["data"]] == [["ex0", "0"]]
