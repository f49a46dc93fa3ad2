"""The W&B sink logs offline without credentials or network, and never fails a run; runs are named
and tagged by what tells them apart."""

import os

from memexp.core.schema import LoggerConfig
from memexp.core.types import Record
from memexp.run.tracking import NullSink, WandbSink, label_overrides, make_sink, resolve_mode, run_name, swept_keys

CONFIG = {"bench": {"name": "ruler"}, "backbone": {"name": "gdn"}, "method": {"name": "notebank"}}


def test_logger_none_is_a_null_sink(tmp_path):
    assert isinstance(make_sink(LoggerConfig(name="none"), tmp_path, {}), NullSink)


def test_auto_mode_is_offline_without_credentials(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert resolve_mode(LoggerConfig(name="wandb")) == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert resolve_mode(LoggerConfig(name="wandb")) == "online"
    assert resolve_mode(LoggerConfig(name="wandb", mode="disabled")) == "disabled"


def test_offline_run_joins_the_sweep_group(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    sink = WandbSink(LoggerConfig(name="wandb"), tmp_path, CONFIG, group="sweep-1", labels=["replay_budget=4"])
    assert sink.run is None  # a W&B run starts with the first thing to log
    sink.log_record(Record(example_id="a", question_id="0", task="niah_single_1", length=256, score=100.0,
                           prediction="1234567", references=["1234567"], tokens={"context": 200}))
    assert sink.run is not None
    assert sink.run.group == "sweep-1" and sink.run.name == "ruler | gdn | notebank | replay_budget=4"
    sink.finish({"scores": {"niah_single_1": {"256": 100.0}}, "overall": 100.0})
    runs = [d for d in os.listdir(tmp_path / "wandb") if d.startswith("offline-run-")]
    assert len(runs) == 1


def test_a_broken_wandb_does_not_raise(monkeypatch, tmp_path, capsys):
    import wandb

    def boom(**kwargs):
        raise ConnectionError("network is unreachable")

    monkeypatch.setattr(wandb, "init", boom)
    sink = WandbSink(LoggerConfig(name="wandb", mode="online"), tmp_path, {"bench": {"name": "ruler"}})
    sink.log_record(Record(example_id="a", question_id="0", task="t", length=1, score=1.0))
    sink.finish({"scores": {}})
    assert "continuing with local records only" in capsys.readouterr().err


def test_a_sweep_names_its_runs_by_the_swept_fields_only():
    jobs = [["method=notebank", "++method.replay_budget=1", "bench.lengths=[512]", "logger=wandb"],
            ["method=notebank", "++method.replay_budget=2", "bench.lengths=[512]", "logger=wandb"],
            ["method=plain", "bench.lengths=[512]", "logger=wandb"]]
    # replay_budget differs (and is absent from the plain job), method differs; lengths and logger do not
    assert swept_keys(jobs) == {"method", "method.replay_budget"}
    labels = label_overrides(jobs[1], swept_keys(jobs))
    assert labels == ["replay_budget=2"]  # the method choice is in the name already
    assert run_name(CONFIG, labels) == "ruler | gdn | notebank | replay_budget=2"


def test_a_single_run_is_named_by_its_command_line_fields_not_its_logging():
    job = ["bench.lengths=[1024]", "++method.router=bm25", "logger.project=x", "progress=false", "max_examples=3"]
    assert label_overrides(job) == ["lengths=[1024]", "router=bm25"]
    assert run_name(CONFIG, []) == "ruler | gdn | notebank"
