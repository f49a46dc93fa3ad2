"""`python -m memexp dashboard`: the spec (built without a network) has, per benchmark, one
score-vs-length panel per task plus the mean, the FLOPs panels and the W / R / B / C parallel
coordinates; every metric a panel plots is one a real offline run logs; the wandb-workspaces
objects carry the same axes; offline the command prints and saves the spec."""

import json

import pytest

from memexp.cli.main import main as memexp_main
from memexp.core.schema import ConfigError
from memexp.report.dashboard import benches_from_runs, dashboard_spec, to_workspace

BENCHES = {"ruler": ["niah_single_1", "niah_multikey_1"], "longbench": ["qasper"]}


def panels(spec, section):
    (found,) = [s for s in spec["sections"] if s["name"] == section]
    return found["panels"]


def test_one_length_panel_per_task_and_one_for_the_mean():
    spec = dashboard_spec(BENCHES)
    assert [s["name"] for s in spec["sections"]] == [
        "ruler: score vs context length", "ruler: cost", "ruler: sweep (W / R / B / C)",
        "longbench: score vs context length", "longbench: cost", "longbench: sweep (W / R / B / C)"]
    ruler = panels(spec, "ruler: score vs context length")
    assert [(p["kind"], p["x"], p["y"]) for p in ruler] == [
        ("line", "length", ["ruler/niah_single_1/score"]),
        ("line", "length", ["ruler/niah_multikey_1/score"]),
        ("line", "length", ["ruler/mean/score"])]
    assert [p["title"] for p in ruler] == ["ruler | niah_single_1: score vs context length",
                                           "ruler | niah_multikey_1: score vs context length",
                                           "ruler | mean over 2 task(s): score vs context length"]
    assert [p["y"] for p in panels(spec, "longbench: score vs context length")] == [["longbench/qasper/score"],
                                                                                    ["longbench/mean/score"]]


def test_score_vs_added_flops_per_run_and_per_length():
    scatter, per_length = panels(dashboard_spec(BENCHES), "ruler: cost")
    assert scatter["kind"] == "scatter"
    assert (scatter["x"], scatter["y"]) == ({"summary": "ruler/added_flops_ratio"}, {"summary": "ruler/overall/score"})
    assert (per_length["kind"], per_length["x"], per_length["y"]) == ("line", "ruler/added_flops_ratio",
                                                                      ["ruler/mean/score"])


def test_the_sweep_panel_runs_over_w_r_b_c_to_the_score():
    (par,) = panels(dashboard_spec(BENCHES), "ruler: sweep (W / R / B / C)")
    assert par["kind"] == "parallel"
    assert [(c["label"], c["axis"]) for c in par["columns"]] == [
        ("W", {"config": "method.write_budget"}), ("R", {"config": "method.replay_budget"}),
        ("B", {"config": "method.span_budget"}), ("C", {"config": "method.chunk_size"}),
        ("score", {"summary": "ruler/overall/score"})]


def axes(panel) -> list:
    if panel["kind"] == "parallel":
        return [c["axis"] for c in panel["columns"]]
    return [panel["x"], *(panel["y"] if panel["kind"] == "line" else [panel["y"]])]


def test_every_plotted_metric_is_one_an_offline_run_logs(resumed):
    """The panels name what memexp.run.tracking logs, checked against a real run's files."""
    _, (_, run) = resumed
    history = {k for row in run.history for k in row}
    spec = dashboard_spec({"ruler": ["niah_single_1"]})
    for section in spec["sections"]:
        for p in section["panels"]:
            for axis in axes(p):
                if isinstance(axis, str):
                    assert axis in history, axis
                    if axis != "length" and p["x"] == "length":
                        assert run.step_metrics[axis] == "length"
                elif "summary" in axis:
                    assert axis["summary"] in run.summary, axis
                else:
                    group, key = axis["config"].split(".")
                    assert key in run.config[group], axis


def test_the_workspace_carries_the_spec_axes():
    spec = dashboard_spec({"ruler": ["niah_single_1"]}, name="nb")
    ws = to_workspace(spec, "ent", "proj")
    assert (ws.entity, ws.project, ws.name) == ("ent", "proj", "nb")
    lengths, cost, sweep = ws.sections
    first = lengths.panels[0]._to_model().config
    assert (first.x_axis, first.metrics) == ("length", ["ruler/niah_single_1/score"])
    scatter = cost.panels[0]._to_model().config
    assert (scatter.x_axis, scatter.y_axis) == ("summary:ruler/added_flops_ratio", "summary:ruler/overall/score")
    accessors = [c.accessor for c in sweep.panels[0]._to_model().config.columns]
    assert accessors == ["config:method.value.write_budget", "config:method.value.replay_budget",
                         "config:method.value.span_budget", "config:method.value.chunk_size",
                         "summary:ruler/overall/score"]


def write_summary(root, bench, tasks):
    folder = root / bench / "tiny_gdn" / "plain" / f"h{len(tasks)}"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"scores": {t: {"512": 1.0} for t in tasks}}))


def test_tasks_are_found_in_the_run_folders(tmp_path):
    write_summary(tmp_path, "ruler", ["niah_single_1"])
    write_summary(tmp_path, "ruler", ["qa_1", "niah_single_1"])
    write_summary(tmp_path, "longbench", ["qasper"])
    assert benches_from_runs(tmp_path) == {"longbench": ["qasper"], "ruler": ["niah_single_1", "qa_1"]}


def test_offline_the_command_prints_and_saves_the_spec(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    write_summary(tmp_path / "runs", "ruler", ["niah_single_1"])
    out = tmp_path / "spec.json"
    assert memexp_main(["dashboard", "--runs", str(tmp_path / "runs"), "--project", "p", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "would create in <default entity>/p" in printed
    assert "line 'ruler | niah_single_1: score vs context length': ruler/niah_single_1/score vs length" in printed
    assert "parallel coordinates 'ruler: sweep over W / R / B / C': W, R, B, C, score" in printed
    assert json.loads(out.read_text()) == dashboard_spec({"ruler": ["niah_single_1"]})


def test_a_named_benchmark_without_runs_uses_its_schema_tasks_and_a_wrong_name_is_one_line(tmp_path, monkeypatch,
                                                                                          capsys):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    out = tmp_path / "spec.json"
    assert memexp_main(["dashboard", "--bench", "ruler", "--bench", "longbench:qasper", "--out", str(out)]) == 0
    spec = json.loads(out.read_text())
    assert [p["y"] for p in panels(spec, "ruler: score vs context length")][0] == ["ruler/niah_single_1/score"]
    assert [p["y"] for p in panels(spec, "longbench: score vs context length")][0] == ["longbench/qasper/score"]
    assert memexp_main(["dashboard", "--bench", "rulr", "--out", str(out)]) == 2
    assert "--bench 'rulr': did you mean ruler?" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="no run folders with results"):
        from memexp.report.dashboard import main

        main(["--runs", str(tmp_path / "empty"), "--out", str(out)])


def test_without_runs_and_out_the_command_reads_and_writes_under_memexp_root(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    write_summary(root / "outputs" / "runs", "ruler", ["niah_single_1"])
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("MEMEXP_ROOT", str(root))
    assert memexp_main(["dashboard"]) == 0
    assert json.loads((root / "outputs" / "dashboard.json").read_text()) == dashboard_spec({"ruler": ["niah_single_1"]})
    assert not list(elsewhere.iterdir())
