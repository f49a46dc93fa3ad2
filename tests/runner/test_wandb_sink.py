"""The W&B sink logs offline without credentials or network, and never fails a run."""

import os

from memexp.config import LoggerConfig
from memexp.records import Record
from memexp.tracking import NullSink, WandbSink, make_sink, resolve_mode


def test_logger_none_is_a_null_sink(tmp_path):
    assert isinstance(make_sink(LoggerConfig(name="none"), tmp_path, {}, "x", [], None, None), NullSink)


def test_auto_mode_is_offline_without_credentials(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert resolve_mode(LoggerConfig(name="wandb")) == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert resolve_mode(LoggerConfig(name="wandb")) == "online"
    assert resolve_mode(LoggerConfig(name="wandb", mode="disabled")) == "disabled"


def test_offline_run_writes_summary_metrics(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    config = {"bench": {"name": "ruler"}, "method": {"name": "plain"}}
    sink = WandbSink(LoggerConfig(name="wandb"), tmp_path, config, "run", ["method:plain"], "sweep-1", None)
    assert sink.run is not None
    sink.log_record(Record(example_id="a", question_id="0", task="niah_single_1", length=256, score=100.0,
                           prediction="1234567", references=["1234567"], tokens={"context": 200}))
    summary = {"scores": {"niah_single_1": {"256": 100.0}}, "overall": 100.0}
    assert sink.run.group == "sweep-1"
    sink.finish(summary)
    runs = [d for d in os.listdir(tmp_path / "wandb") if d.startswith("offline-run-")]
    assert len(runs) == 1


def test_a_broken_wandb_does_not_raise(monkeypatch, tmp_path, capsys):
    import wandb

    def boom(**kwargs):
        raise ConnectionError("network is unreachable")

    monkeypatch.setattr(wandb, "init", boom)
    sink = WandbSink(LoggerConfig(name="wandb", mode="online"), tmp_path, {"bench": {"name": "ruler"}}, "r", [], None,
                     None)
    sink.log_record(Record(example_id="a", question_id="0", task="t", length=1, score=1.0))
    sink.finish({"scores": {}})
    assert "continuing with local records only" in capsys.readouterr().err
