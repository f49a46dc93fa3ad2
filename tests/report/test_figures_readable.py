"""The report's figures can be read: legends below the axes and inside the figure however long
the labels, labels naming only what differs, distinct markers and offsets for equal points, FLOPs
lines joining only one configuration family, and the FLOPs breakdown at the records' own replayed
tokens (not the R x B bound)."""

from __future__ import annotations

import pytest

from memexp.report import figures as fg
from memexp.results.runs import added_flops_percent, find_runs

RULER = ["bench=ruler", "bench.tasks=[niah_single_1]", "bench.lengths=[1024,2048]"]


@pytest.fixture
def drawn(monkeypatch):
    """The figures a call draws, kept open instead of saved."""
    figs = []
    monkeypatch.setattr(fg, "_save", lambda fig, path: figs.append(fig) or path)
    return figs


def _box(artist, renderer):
    return artist.get_window_extent(renderer)


def test_a_long_label_wraps_and_its_legend_stays_below_the_axes_inside_the_figure(tmp_path, runs_factory, drawn):
    long = "x" * 60 + " " + "y" * 60 + " " + "z" * 60
    runs_factory(tmp_path, ["method=notebank", f"method.replay_suffix='{long}'", *RULER])
    runs_factory(tmp_path, ["method=notebank", *RULER], salt=1)
    fg.length_figure(tmp_path / "f.png", "ruler", find_runs([tmp_path]))
    (fig,) = drawn
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    box, axes, whole = _box(legend, renderer), _box(fig.axes[0], renderer), fig.bbox
    assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0  # not cut off
    assert box.y1 <= axes.y0  # below the axes, over no data
    texts = [t.get_text() for t in legend.get_texts()]
    assert any("\n" in t for t in texts) and all(len(line) < 100 for t in texts for line in t.splitlines())


def test_labels_name_only_what_differs_between_the_curves(tmp_path, runs_factory):
    runs_factory(tmp_path, ["method=notebank", "method.router=native", *RULER])
    runs_factory(tmp_path, ["method=notebank", "method.router=bm25", *RULER], salt=1)
    runs = find_runs([tmp_path])
    assert sorted(fg.curve_labels(runs)) == ['router="bm25"', 'router="native"']


def test_equal_points_get_their_own_marker_and_offset(tmp_path, runs_factory, drawn):
    runs_factory(tmp_path, ["method=notebank", "method.router=native", *RULER])
    runs_factory(tmp_path, ["method=notebank", "method.router=bm25", *RULER])  # the same scores
    fg.length_figure(tmp_path / "f.png", "ruler", find_runs([tmp_path]))
    lines = [line for line in drawn[0].axes[0].get_lines() if line.get_marker() in fg.MARKERS]  # not the caps
    assert len(lines) == 2
    assert lines[0].get_marker() != lines[1].get_marker()
    assert list(lines[0].get_ydata()) == list(lines[1].get_ydata())
    assert all(a != b for a, b in zip(lines[0].get_xdata(), lines[1].get_xdata()))


def test_flops_lines_join_only_runs_of_one_configuration_family(tmp_path, runs_factory, drawn):
    for r in (1, 2):
        runs_factory(tmp_path, ["method=notebank", "method.router=native", f"method.replay_budget={r}", *RULER], salt=r)
        runs_factory(tmp_path, ["method=notebank", "method.router=bm25", f"method.replay_budget={r}", *RULER], salt=r + 2)
    runs = find_runs([tmp_path])
    fg.flops_figure(tmp_path / "f.png", "ruler", runs)
    joins = [line for line in drawn[0].axes[0].get_lines() if line.get_color() == "0.7"]
    assert len(joins) == 4  # two families x two lengths, each joining its own R = 1 and R = 2
    pct = {r.method["router"]: {} for r in runs}
    for r in runs:
        for n, v in added_flops_percent(r).items():
            pct[r.method["router"]].setdefault(n, set()).add(round(v, 6))
    for line in joins:
        xs = {round(x, 6) for x in line.get_xdata()}
        assert len(xs) == 2 and any(xs == pct[router][n] for router in pct for n in pct[router])


def test_the_breakdown_is_at_the_records_replayed_tokens(tmp_path, runs_factory, drawn):
    # 10 replayed tokens per question where R x B = 2 x 64 = 128 would be the bound
    runs_factory(tmp_path, ["method=notebank", *RULER], replay=10)
    (run,) = find_runs([tmp_path])
    per_length, assumed = fg._breakdown(run)
    recorded = added_flops_percent(run)  # each record's own costs (memexp.costs.report.record_costs)
    for n, parts in per_length.items():
        assert sum(parts.values()) == pytest.approx(recorded[n], rel=0.02)
    fg.breakdown_figure(tmp_path / "f.png", "ruler", [run])
    assert "records' mean" in drawn[0]._suptitle.get_text()
