"""One unreadable run folder (a truncated summary, a records file that cannot be opened, a broken
config) is one line naming the file; the report of every other folder is still made, and the
command exits non-zero at the end."""

import pytest
from report_runs import make_run

from memexp.cli.main import main as memexp_main

RUN = ["method=plain", "bench=ruler", "bench.tasks=[niah_single_1]", "bench.lengths=[512]"]


def _truncate_summary(folder):
    path = folder / "summary.json"
    path.write_text(path.read_text()[:40])
    return path


def _records_not_a_file(folder):
    path = folder / "records.jsonl"
    path.unlink()
    path.mkdir()
    return path


def _config_not_yaml(folder):
    path = folder / "config.yaml"
    path.write_text("backbone: [unclosed\n")
    return path


def _summary_a_list(folder):
    path = folder / "summary.json"
    path.write_text("[1, 2]\n")
    return path


@pytest.mark.parametrize("spoil", [_truncate_summary, _records_not_a_file, _config_not_yaml, _summary_a_list])
def test_one_unreadable_folder_is_named_and_the_rest_reported(tmp_path, capsys, spoil):
    runs = tmp_path / "runs"
    good = make_run(runs, RUN, salt=1)
    bad = make_run(runs, [*RUN, "bench.num_samples=7"], salt=2)
    spoiled = spoil(bad.path)
    rc = memexp_main(["report", str(runs)])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 1, err
    assert len(lines) == 1 and lines[0].startswith(f"memexp: report: {spoiled}: unreadable"), err
    assert lines[0].endswith("left out of the report")
    score, _ = good.by_length("512")
    assert f"{score:.1f}" in out and "512" in out  # the good run's table is printed
