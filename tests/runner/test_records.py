"""Records survive a kill at any byte; summaries are the papers' task x length tables."""

import json

from memexp.records import RunFolder, config_hash, format_table, summarize


def _rec(ex, q, task="t", length=256, score=100.0):
    return {"example_id": ex, "question_id": q, "task": task, "length": length, "score": score}


def test_partial_last_line_is_dropped_and_cut_from_the_file(tmp_path):
    folder = RunFolder(tmp_path)
    folder.append(_rec("a", "0"))
    folder.append(_rec("b", "0"))
    whole = folder.records_path.read_bytes()
    line = (json.dumps(_rec("c", "0")) + "\n").encode()
    for cut in range(1, len(line)):  # a kill after every possible prefix of the third record
        folder.records_path.write_bytes(whole + line[:cut])
        records = folder.load_records()
        assert [r["example_id"] for r in records] == ["a", "b"]
        assert folder.records_path.read_bytes() == whole
    folder.append(_rec("c", "0"))
    assert [r["example_id"] for r in folder.load_records()] == ["a", "b", "c"]


def test_duplicate_records_are_read_once(tmp_path):
    folder = RunFolder(tmp_path)
    folder.append(_rec("a", "0", score=100.0))
    folder.append(_rec("a", "0", score=0.0))
    folder.append(_rec("a", "1"))
    records = folder.load_records()
    assert [(r["example_id"], r["question_id"], r["score"]) for r in records] == [("a", "0", 100.0), ("a", "1", 100.0)]


def test_summary_by_task_and_length():
    recs = [_rec("a", "0", "x", 256, 100.0), _rec("b", "0", "x", 256, 0.0), _rec("c", "0", "x", 1024, 50.0),
            _rec("d", "0", "y", 256, 100.0)]
    s = summarize(recs)
    assert s["scores"] == {"x": {"256": 50.0, "1024": 50.0}, "y": {"256": 100.0}}
    assert s["by_length"] == {"256": 66.67, "1024": 50.0}
    assert s["by_task"] == {"x": 50.0, "y": 100.0}
    assert s["overall"] == 62.5 and s["num_questions"] == 4
    table = format_table(s)
    assert "x" in table and "62.50" in table and table.index("256") < table.index("1024")


def test_config_hash_ignores_how_a_run_is_watched_not_what_it_computes():
    base = {"backbone": {"name": "b"}, "method": {"name": "m", "replay_budget": 2}, "bench": {"name": "r"},
            "logger": {"name": "none"}, "progress": True, "output_dir": "x"}
    watched = dict(base, logger={"name": "wandb"}, progress=False, output_dir="y")
    other = dict(base, method={"name": "m", "replay_budget": 4})
    assert config_hash(base) == config_hash(watched)
    assert config_hash(base) != config_hash(other)
