"""`memexp report` over one folder that mixes RULER and LongBench runs, runs with equal
labels, runs that differ only in bench.lengths, an incomplete run, routers and a B x R sweep
reached through a Hydra sweep folder: every table and figure is written, the PNGs are real
pictures, and the tables' numbers are the ones the runs recorded."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from matplotlib.image import imread

from memexp.cli.main import main as memexp_main

RULER = ["bench=ruler", "bench.tasks=[niah_single_1,niah_multikey_1]"]
LENGTHS = ["bench.lengths=[512,1024]"]
NB = ["method=notebank", "method.chunk_size=128", "method.window=16"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from report_runs import make_run

    root = tmp_path_factory.mktemp("report")
    runs = root / "outputs" / "runs"
    made = {
        "plain_short": make_run(runs, ["method=plain", *RULER, "bench.lengths=[512]"], salt=1),
        "plain": make_run(runs, ["method=plain", *RULER, *LENGTHS], salt=2),
        "jrt": make_run(runs, ["method=jrt", *RULER, *LENGTHS], salt=3, complete=False),
        "nb_native": make_run(runs, [*NB, *RULER, *LENGTHS, "method.router=native"], salt=4),
        "nb_bm25": make_run(runs, [*NB, *RULER, *LENGTHS, "method.router=bm25"], salt=5),
        # the same configuration twice (another output root): equal labels
        "plain_again": make_run(root / "elsewhere" / "runs", ["method=plain", *RULER, *LENGTHS], salt=6),
        "lb_plain": make_run(runs, ["method=plain", "bench=longbench", "bench.tasks=[trec,qasper]"],
                             lengths=["0-4k", "4-8k"], salt=7),
        "lb_nb": make_run(runs, [*NB, "bench=longbench", "bench.tasks=[trec,qasper]"],
                          lengths=["0-4k", "4-8k"], salt=8),
    }
    # a B x R sweep whose run folders are reached through a Hydra sweep folder's pointers
    sweep = root / "multirun" / "2025-01-01" / "12-00-00"
    for job, (b, r) in enumerate([(32, 1), (64, 1), (32, 2), (64, 2)]):
        m = make_run(root / "sweep_runs", [*NB, *RULER, *LENGTHS, "method.write_budget=1", f"method.span_budget={b}",
                                           f"method.replay_budget={r}"], salt=10 + job)
        made[f"B{b}R{r}"] = m
        (sweep / str(job)).mkdir(parents=True)
        (sweep / str(job) / "run_folder.txt").write_text(str(m.path) + "\n")
    tables, figures = root / "tables", root / "figures"
    rc = memexp_main(["report", str(runs), str(root / "elsewhere"), str(sweep),
                      "--tables", str(tables), "--figures", str(figures)])
    assert rc == 0
    return {"root": root, "made": made, "tables": tables, "figures": figures}


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    with open(path) as f:
        rows = list(csv.reader(f))
    head = rows[0]
    return {r[0]: dict(zip(head[1:], r[1:])) for r in rows[1:]}


def test_every_table_is_written_in_three_formats_per_bench(folder):
    names = {p.stem for p in folder["tables"].iterdir()}
    expected = {"ruler_by_length", "ruler_by_task", "ruler_niah_single_1_by_length", "ruler_niah_multikey_1_by_length",
                "ruler_routers", "ruler_B_R", "longbench_by_length", "longbench_by_task", "longbench_trec_by_length",
                "longbench_qasper_by_length", "longbench_aggregates"}
    assert expected <= names, expected - names
    for name in expected:
        for ext in ("md", "csv", "tex"):
            assert (folder["tables"] / f"{name}.{ext}").stat().st_size > 0
    tex = (folder["tables"] / "ruler_by_length.tex").read_text()
    assert r"\begin{tabular}" in tex and r"tiny\_gdn\_random" in tex
    # no LongBench row in a RULER table and no RULER length in a LongBench table
    assert "0-4k" not in (folder["tables"] / "ruler_by_length.md").read_text()
    assert "1024" not in (folder["tables"] / "longbench_by_length.md").read_text().split("\n")[2]


def test_figures_are_real_pictures(folder):
    expected = ["ruler_length", "ruler_length_by_task", "ruler_flops", "ruler_flops_breakdown", "ruler_B_R",
                "ruler_routers", "longbench_length", "longbench_length_by_task", "longbench_flops"]
    for name in expected:
        img = imread(folder["figures"] / f"{name}.png")
        assert img.shape[0] >= 300 and img.shape[1] >= 500, (name, img.shape)
        gray = img[..., :3].mean(axis=-1)
        assert gray.std() > 0.05, f"{name} looks blank"
        assert (gray < 0.5).mean() > 0.001, f"{name} has no dark pixels (no text or lines)"


def test_by_length_numbers_are_the_recorded_ones(folder):
    made, table = folder["made"], read_csv(folder["tables"] / "ruler_by_length.csv")
    label = "tiny_gdn_random / {} (bench.lengths={})"
    rows = {"plain_short": label.format("plain", "[512]"), "jrt": label.format("jrt", "[512, 1024]") + " (incomplete)"}
    for key, row in rows.items():
        m, summary = made[key], json.loads((made[key].path / "summary.json").read_text())
        for length in summary["by_length"]:
            score, n = m.by_length(length)
            assert float(table[row][length]) == pytest.approx(score, abs=0.005)
            assert float(table[row][length]) == pytest.approx(summary["by_length"][length], abs=0.005)
            assert int(table[row][f"{length} n"]) == n
        assert float(table[row]["mean"]) == pytest.approx(m.overall()[0], abs=0.005)
        assert int(table[row]["mean n"]) == m.overall()[1] == summary["num_questions"]
    assert table[rows["plain_short"]]["1024"] == ""  # never ran there


def test_equal_configs_get_distinct_labels_and_both_rows_hold_their_own_numbers(folder):
    table = read_csv(folder["tables"] / "ruler_by_length.csv")
    twins = [k for k in table if k.startswith("tiny_gdn_random / plain (bench.lengths=[512, 1024])")]
    assert len(twins) == 2, list(table)
    got = sorted(float(table[k]["mean"]) for k in twins)
    want = sorted(folder["made"][k].overall()[0] for k in ("plain", "plain_again"))
    assert got == pytest.approx(want, abs=0.005)


def test_routers_side_by_side(folder):
    table = read_csv(folder["tables"] / "ruler_routers.csv")
    # every NoteBank run is a row, named by its router and the fields that differ between them
    assert len(table) == 6
    for router, key in (("native", "nb_native"), ("bm25", "nb_bm25")):
        router = f"{router} (replay_budget=2, span_budget=64, write_budget=2)"
        m = folder["made"][key]
        assert float(table[router]["tiny_gdn_random"]) == pytest.approx(m.overall()[0], abs=0.005)
        assert float(table[router]["tiny_gdn_random @ 1024"]) == pytest.approx(m.by_length("1024")[0], abs=0.005)


def test_sweep_grid_holds_each_B_R_run(folder):
    table = read_csv(folder["tables"] / "ruler_B_R.csv")
    assert set(table) == {"B=32, R=1", "B=64, R=1", "B=32, R=2", "B=64, R=2"}
    for b, r in ((32, 1), (64, 1), (32, 2), (64, 2)):
        m = folder["made"][f"B{b}R{r}"]
        for length in ("512", "1024"):
            assert float(table[f"B={b}, R={r}"][length]) == pytest.approx(m.by_length(length)[0], abs=0.005)
            assert int(table[f"B={b}, R={r}"][f"{length} n"]) == m.by_length(length)[1]


def test_longbench_tables_carry_the_benchmark_aggregates(folder):
    table = read_csv(folder["tables"] / "longbench_aggregates.csv")
    summary = json.loads((folder["made"]["lb_plain"].path / "summary.json").read_text())
    row = table["tiny_gdn_random / plain"]
    assert float(row["overall"]) == pytest.approx(summary["aggregate/overall"], abs=0.005)
    # LongBench's overall is the unweighted mean of its subsets (here: equal n, so the mean of the two)
    trec = folder["made"]["lb_plain"].cells
    means = [100.0 * sum(c for (t, _), (c, _) in trec.items() if t == task) /
             sum(n for (t, _), (_, n) in trec.items() if t == task) for task in ("trec", "qasper")]
    assert float(row["overall"]) == pytest.approx(sum(means) / 2, abs=0.01)


def test_incomplete_runs_are_marked_in_markdown(folder):
    md = (folder["tables"] / "ruler_by_length.md").read_text()
    assert "tiny_gdn_random / jrt (bench.lengths=[512, 1024]) (incomplete)" in md
    assert "complete: false" in md
    assert "(n=" in md
