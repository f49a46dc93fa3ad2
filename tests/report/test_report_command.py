"""`python -m memexp report` compares run folders by length, naming what differs."""

import json

import yaml

from memexp.report import comparison, find_runs, render


def _run(root, name, method, scores):
    d = root / name
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump({"backbone": {"name": "tiny"}, "method": method}))
    (d / "summary.json").write_text(json.dumps({"scores": {"t": scores}, "by_length": scores}))


def test_rows_name_only_the_fields_that_differ_within_a_method(tmp_path):
    _run(tmp_path, "a", {"name": "plain"}, {"1024": 100.0, "4096": 20.0})
    _run(tmp_path, "b", {"name": "notebank", "rescale": None, "separator": "\n\n"}, {"1024": 100.0, "4096": 90.0})
    _run(tmp_path, "c", {"name": "notebank", "rescale": 0.0, "separator": "\n\n"}, {"1024": 60.0})
    lengths, rows = comparison(find_runs([tmp_path]), "t")
    assert lengths == ["1024", "4096"]
    assert rows == [("tiny / notebank (rescale=0.0)", {"1024": 60.0}),
                    ("tiny / notebank (rescale=null)", {"1024": 100.0, "4096": 90.0}),
                    ("tiny / plain", {"1024": 100.0, "4096": 20.0})]
    table = render(lengths, rows, markdown=True)
    assert "| tiny / plain | 100.0 | 20.0 |" in table and "| tiny / notebank (rescale=0.0) | 60.0 | - |" in table
