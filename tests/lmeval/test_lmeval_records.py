"""lm-eval's logged samples as memexp records: a sample without a numeric metric is left out and
counted, so no NaN score is written or summarised."""

from __future__ import annotations

import json

from memexp.lmeval.records import finish


def test_a_sample_without_a_numeric_metric_is_counted_not_recorded(tmp_path):
    samples = {"niah_single_1": [
        {"doc_id": 0, "doc": {"max_length": 4096}, "metrics": ["4096"], "4096": 1.0, "filtered_resps": ["7"],
         "target": "7"},
        {"doc_id": 1, "doc": {"max_length": 4096}, "metrics": ["4096"], "4096": 0.0, "filtered_resps": ["3"],
         "target": "8"},
        {"doc_id": 2, "doc": {"max_length": 4096}, "metrics": ["exact"], "exact": "n/a", "filtered_resps": ["x"],
         "target": "9"},
    ]}
    summary = finish(tmp_path, {"model": "tiny"}, samples)
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [r["score"] for r in records] == [100.0, 0.0]
    assert summary["unscored"] == 1 and summary["num_examples"] == 2
    assert summary["overall"] == 50.0
