"""memexp.results on a mixed folder of runs (NoteBank with two routers on two tasks, NoteBank on
one task, Plain on one task): one row per question with the config's fields, the task x length
summary with n and Wilson intervals, `--where` / `--by` / `--label` / `--csv` in `report`, and
runs of different task sets never averaged together. Expected numbers are the factory's counts."""

from __future__ import annotations

import csv

import pytest

from memexp.cli.main import main as memexp_main
from memexp.results import load_runs, summarize

TWO = ["bench=ruler", "bench.tasks=[niah_single_1,qa_1]", "bench.lengths=[512,1024]"]
ONE = ["bench=ruler", "bench.tasks=[niah_single_1]", "bench.lengths=[512,1024]"]


@pytest.fixture
def mixed(tmp_path, runs_factory):
    made = {
        "native": runs_factory(tmp_path, ["method=notebank", "method.router=native", *TWO], n=10, salt=5),
        "bm25": runs_factory(tmp_path, ["method=notebank", "method.router=bm25", *TWO], n=10, salt=1),
        "bm25_one": runs_factory(tmp_path, ["method=notebank", "method.router=bm25", *ONE], n=10, salt=3),
        "plain": runs_factory(tmp_path, ["method=plain", *ONE], n=10, salt=2),
    }
    return tmp_path, made


def test_one_row_per_question_with_every_config_field(mixed):
    root, made = mixed
    df = load_runs(root)
    assert len(df) == sum(m for run in made.values() for _, m in run.cells.values()) == 120
    native = df[df["run"] == made["native"].path.name]
    assert len(native) == 40 and set(native["method.router"]) == {"native"}
    assert set(native["method.replay_budget"]) == {2} and set(native["bench.lengths"]) == {"[512, 1024]"}
    assert set(native["task"]) == {"niah_single_1", "qa_1"} and set(native["length"]) == {"512", "1024"}
    assert (native["tokens.context"] == native["length"].astype(int) - 40).all()
    assert (native["costs.added_flops"] > 0).all() and "example_id" in df and "prediction" in df
    k, n = made["native"].cells[("qa_1", "1024")]
    cell = native[(native["task"] == "qa_1") & (native["length"] == "1024")]
    assert len(cell) == n and cell["score"].sum() == 100.0 * k


def test_where_filters_runs_and_names_a_mistyped_field(mixed):
    root, made = mixed
    assert set(load_runs(root, where="method.name=notebank")["method.name"]) == {"notebank"}
    assert len(load_runs(root, where=["method.name=notebank", "method.router!=bm25"])) == 40
    assert len(load_runs(root, where="bench.tasks=[niah_single_1]")) == 40
    with pytest.raises(KeyError, match="method.rooter: no run has this field; did you mean method.router"):
        load_runs(root, where="method.rooter=bm25")


def test_summary_cells_hold_n_the_score_and_the_wilson_interval(mixed):
    root, made = mixed
    s = summarize(load_runs(root, where="method.router=native"), by=["method.router"])
    row = s[(s["task"] == "niah_single_1") & (s["length"] == "512")].iloc[0]
    assert made["native"].cells[("niah_single_1", "512")] == (5, 10)  # (3*0 + 2*0 + 5) % 11
    assert (row["n"], row["score"]) == (10, 50.0)
    # Wilson (1927) / Newcombe (1998) Table I: 5/10 at 95 % is 23.66-76.34
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((23.66, 76.34), abs=0.01)
    pooled = s[(s["task"] == "all") & (s["length"] == "all")].iloc[0]
    assert (pooled["n"], pooled["score"]) == (40, pytest.approx(made["native"].overall()[0]))


def test_runs_of_different_task_sets_are_never_averaged_together(mixed):
    root, made = mixed
    s = summarize(load_runs(root, where="method.name=notebank"), by=["method.router"])
    bm25 = s[(s["method.router"] == "bm25") & (s["task"] == "all") & (s["length"] == "all")]
    assert sorted(bm25["n"]) == [20, 40]  # the one-task run and the two-task run: two rows, not one of 60
    assert sorted(bm25["score"]) == sorted([made["bm25_one"].overall()[0], made["bm25"].overall()[0]])


def test_report_where_by_label_prints_named_rows_and_writes_long_csv(mixed, capsys):
    root, made = mixed
    out = root / "summary.csv"
    assert memexp_main(["report", str(root), "--where", "method.name=notebank", "--by", "method.router",
                        "--label", "{method.router}", "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    two = printed[printed.index('task_set=["niah_single_1", "qa_1"]'):]
    lines = {line.split()[0]: line for line in two.splitlines()[2:4]}
    assert set(lines) == {"bm25", "native"}
    score, n = made["bm25"].by_length("1024")
    assert f"{score:.1f} (n={n})" in lines["bm25"]
    rows = list(csv.DictReader(out.open()))
    assert {r["label"] for r in rows} == {"bm25", "native"}
    cell = [r for r in rows if (r["label"], r["task"], r["length"]) == ("native", "qa_1", "1024")
            and "qa_1" in r["task_set"]]
    k, n = made["native"].cells[("qa_1", "1024")]
    assert len(cell) == 1 and int(cell[0]["n"]) == n and float(cell[0]["score"]) == pytest.approx(100.0 * k / n)
    assert memexp_main(["report", str(root), "--where", "method.nam=notebank"]) == 2
    assert "did you mean method.name" in capsys.readouterr().err


def test_the_default_report_puts_task_sets_in_separate_tables(mixed, capsys):
    root, _ = mixed
    assert memexp_main(["report", str(root)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("mean over tasks") == 2
    assert "ruler_niah_single_1 ·" in printed and "ruler_niah_single_1+qa_1 ·" in printed
