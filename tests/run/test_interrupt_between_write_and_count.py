"""Ctrl-C that lands after a record reached records.jsonl but before the runner counted it: the
partial summary still describes the file, which is what a resume reads (a CI run once caught
this window: summary.json was missing while records.jsonl held a record)."""

import json

import pytest

import memexp.run.runner as runner
from memexp.core.compose import load_config
from memexp.core.errors import RunInterrupted
from memexp.run.records import RunFolder


def test_the_partial_summary_counts_a_record_written_just_before_the_interrupt(tmp_path, monkeypatch):
    written = RunFolder.append

    def append_then_interrupt(self, record):
        written(self, record)
        if sum(1 for _ in self.records_path.open()) == 2:
            raise KeyboardInterrupt  # the second record is on disk, the runner has not counted it yet

    monkeypatch.setattr(RunFolder, "append", append_then_interrupt)
    cfg = load_config(["backbone=tiny_gdn_random", "method=plain", "bench=ruler", "bench.num_samples=3",
                       "bench.lengths=[1024]", "bench.tasks=[niah_single_1]", f"output_dir={tmp_path}",
                       "progress=false"])
    with pytest.raises(RunInterrupted) as stopped:
        runner.run(cfg)
    (records,) = tmp_path.rglob("records.jsonl")
    assert len(records.read_text().splitlines()) == 2
    assert "interrupted with 2 questions recorded" in str(stopped.value)
    summary = json.loads((records.parent / "summary.json").read_text())
    assert summary["complete"] is False and summary["num_questions"] == 2
