"""The report's parts users rely on: Wilson intervals, labels that never collide, the paper's
numbers beside memexp's, shards merged into one row, the README figure's command, and a
report that never modifies a run folder."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from matplotlib.image import imread

from memexp.cli.main import main as memexp_main
from memexp.report.figures import wilson
from memexp.report.paper import column

RULER = ["bench=ruler", "bench.tasks=[niah_single_1]"]


@pytest.mark.parametrize("score, n, lo, hi", [
    # Wilson (1927) / Newcombe (1998) Table I values: 5/10, 0/10 and 10/10 at 95 %
    (50.0, 10, 23.66, 76.34), (0.0, 10, 0.0, 27.75), (100.0, 10, 72.25, 100.0),
    # 81/263 (Newcombe's example 1): 0.2553-0.3662
    (100.0 * 81 / 263, 263, 25.53, 36.62),
])
def test_wilson_interval_matches_published_values(score, n, lo, hi):
    got = wilson(score, n)
    assert got == pytest.approx((lo, hi), abs=0.01)


def test_paper_columns_read_4K_and_1M_as_token_counts():
    assert [column(k) for k in ("4K", "1M", 65536, "niah_single_1")] == ["4096", "1048576", "65536", "niah_single_1"]


def test_two_plain_runs_that_differ_only_in_lengths_are_two_labelled_rows(tmp_path, runs_factory, capsys):
    """The crash of issue 14 (TypeError '<' between dicts)."""
    runs_factory(tmp_path, ["method=plain", *RULER, "bench.lengths=[512]"], salt=1)
    runs_factory(tmp_path, ["method=plain", *RULER, "bench.lengths=[1024]"], salt=2)
    capsys.readouterr()
    assert memexp_main(["report", str(tmp_path), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| tiny_gdn_random / plain (bench.lengths=[512]) |" in out
    assert "| tiny_gdn_random / plain (bench.lengths=[1024]) |" in out


def test_labels_name_what_differs_and_not_where_files_were_written():
    """A multirun job and a single run record `paths` differently ("/abs" vs "."): not a difference."""
    from memexp.results.labels import labels

    def config(router, root):
        return {"backbone": {"name": "b"}, "method": {"name": "notebank", "router": router}, "bench": {"name": "ruler"},
                "paths": {"root": root, "runs": f"{root}/outputs/runs"}}

    assert labels([config("native", "/work/x"), config("oracle", ".")]) == [
        'b / notebank (router="native")', 'b / notebank (router="oracle")']


def test_an_adapter_under_memexps_assets_is_labelled_by_its_asset_name_on_any_machine():
    """Two machines installed memexp in different folders: the same shipped adapter reads the same,
    and a folder outside the assets keeps its path."""
    from memexp.results.labels import labels

    def config(adapter):
        return {"backbone": {"name": "b"}, "method": {"name": "notebank", "adapter": adapter}, "bench": {"name": "ruler"}}

    got = labels([config("/work/main/memexp/assets/tiny_gdn_words_lora/notebank"),
                  config("/home/u/src/memexp/assets/tiny_gdn_words_lora/notebank"), config("/data/my_lora")])
    shipped = 'b / notebank (adapter="${memexp_asset:tiny_gdn_words_lora/notebank}")'
    # the two shipped ones are one config: equal labels, told apart only by their position
    assert got == [f"{shipped} #1", f"{shipped} #2", 'b / notebank (adapter="/data/my_lora")']


def _csv(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    return {r[0]: dict(zip(rows[0][1:], r[1:])) for r in rows[1:]}


def test_paper_numbers_sit_beside_memexps(tmp_path, runs_factory):
    runs_factory(tmp_path / "runs", ["method=plain", *RULER, "bench.lengths=[512,1024]"])
    paper = tmp_path / "paper_ruler_tiny.numbers.yaml"
    paper.write_text("source: Table 1\nbench: ruler\nbackbone: tiny_gdn_random\n"
                     "rows:\n  plain: {1K: 98.5, 512: 100, 1M: 1.7}\n"
                     "  notebank: {niah_single_1: 77.25}\n")
    other = tmp_path / "other_bench.yaml"  # a LongBench table: never in a RULER table
    other.write_text("[{source: Table 5, bench: longbench, rows: {plain: {trec: 30}}}]\n")
    rc = memexp_main(["report", str(tmp_path / "runs"), "--paper", str(paper), "--paper", str(other),
                      "--tables", str(tmp_path / "t"), "--figures", str(tmp_path / "f")])
    assert rc == 0
    by_length = _csv(tmp_path / "t" / "ruler_by_length.csv")
    row = by_length["paper Table 1: tiny_gdn_random / plain"]
    assert (row["512"], row["1024"], row["512 n"]) == ("100.00", "98.50", "")
    assert "1048576" not in by_length["tiny_gdn_random / plain"]  # a paper column memexp did not run is not added
    by_task = _csv(tmp_path / "t" / "ruler_by_task.csv")
    assert by_task["paper Table 1: tiny_gdn_random / notebank"]["niah_single_1"] == "77.25"
    assert not any("Table 5" in k for k in by_length) and not any("Table 5" in k for k in by_task)
    assert (tmp_path / "f" / "ruler_length.png").exists()


def test_a_malformed_paper_file_is_one_line_naming_the_field(tmp_path, runs_factory, capsys):
    runs_factory(tmp_path / "runs", ["method=plain", *RULER, "bench.lengths=[512]"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("source: Table 1\nbench: ruler\nrows: {plain: {512: high}}\n")
    assert memexp_main(["report", str(tmp_path / "runs"), "--paper", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rows.plain: scores must be numbers" in err[0]


def test_a_paper_preset_name_reads_the_numbers_memexp_ships(tmp_path, runs_factory, capsys):
    """`--paper paper_ruler_niah` is the shipped memexp/report/paper_numbers/paper_ruler_niah.gdn.yaml, in the format
    the loader reads; an unknown name is one line listing the presets."""
    from memexp.report.paper import PAPER_NUMBERS, load, resolve

    for path in sorted(PAPER_NUMBERS.glob("*.yaml")):
        assert load(path), path  # every shipped file parses with report's own schema
    assert resolve("paper_ruler_niah") == [PAPER_NUMBERS / "paper_ruler_niah.gdn.yaml"]
    runs_factory(tmp_path / "runs", ["method=plain", *RULER, "bench.lengths=[512]"])
    assert memexp_main(["report", str(tmp_path / "runs"), "--paper", "paper_rulr_niah"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "paper_ruler_niah" in err[0]


def test_shards_of_one_config_are_one_row_and_a_missing_shard_marks_it_incomplete(tmp_path, runs_factory):
    args = ["method=plain", *RULER, "bench.lengths=[512,1024]"]
    a = runs_factory(tmp_path / "runs", args, n=6, shard="0/2", keep=lambda t, n, i: i % 2 == 0)
    b = runs_factory(tmp_path / "runs", args, n=6, shard="1/2", keep=lambda t, n, i: i % 2 == 1)
    rc = memexp_main(["report", str(tmp_path / "runs"), "--tables", str(tmp_path / "t")])
    assert rc == 0
    table = _csv(tmp_path / "t" / "ruler_by_length.csv")
    assert list(table) == ["tiny_gdn_random / plain"]
    row = table["tiny_gdn_random / plain"]
    for length in ("512", "1024"):
        k = a.cells[("niah_single_1", length)][0] + b.cells[("niah_single_1", length)][0]
        assert int(row[f"{length} n"]) == 6
        assert float(row[length]) == pytest.approx(100.0 * k / 6, abs=0.005)

    only_one = tmp_path / "one"
    runs_factory(only_one, args, n=6, shard="0/2", keep=lambda t, n, i: i % 2 == 0)
    memexp_main(["report", str(only_one), "--tables", str(tmp_path / "t1")])
    assert list(_csv(tmp_path / "t1" / "ruler_by_length.csv")) == ["tiny_gdn_random / plain (incomplete)"]


def test_the_readme_figure_command_writes_the_length_plot(tmp_path, runs_factory, monkeypatch):
    """README: python -m memexp report outputs/runs/ruler/tiny_gdn --task niah_single_1 --plot docs/tiny_gdn.png"""
    out = tmp_path / "outputs" / "runs"
    for method in ("plain", "jrt"):
        runs_factory(out, [f"method={method}", *RULER, "bench.lengths=[512,1024,2048]"], n=5)
    runs_factory(out, ["method=notebank", "method.chunk_size=128", "method.window=16", *RULER,
                       "bench.lengths=[512,1024,2048]"], n=5)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    rc = memexp_main(["report", "outputs/runs/ruler/tiny_gdn_random", "--task", "niah_single_1",
                      "--plot", "docs/tiny_gdn.png"])
    assert rc == 0
    img = imread(tmp_path / "docs" / "tiny_gdn.png")
    assert img.shape[0] >= 400 and img.shape[1] >= 700
    assert img[..., :3].mean(axis=-1).std() > 0.05


def test_report_changes_nothing_in_a_run_folder_being_written(tmp_path, runs_factory):
    made = runs_factory(tmp_path / "runs", ["method=plain", *RULER, "bench.lengths=[512]"])
    records = made.path / "records.jsonl"
    with open(records, "ab") as f:
        f.write(b'{"example_id": "niah_single_1/512/9", "question_id"')  # a record still being written
    before = {p.name: p.read_bytes() for p in made.path.iterdir()}
    assert memexp_main(["report", str(tmp_path / "runs"), "--tables", str(tmp_path / "t"),
                        "--figures", str(tmp_path / "f")]) == 0
    assert {p.name: p.read_bytes() for p in made.path.iterdir()} == before


def test_mixed_benches_with_plot_write_one_file_per_bench(tmp_path, runs_factory):
    runs_factory(tmp_path, ["method=plain", *RULER, "bench.lengths=[512]"])
    runs_factory(tmp_path, ["method=plain", "bench=longbench", "bench.tasks=[trec]"], lengths=["0-4k"])
    assert memexp_main(["report", str(tmp_path), "--plot", str(tmp_path / "p.png")]) == 0
    for bench in ("ruler", "longbench"):
        img = imread(tmp_path / f"p_{bench}.png")
        assert np.asarray(img).std() > 0.05
