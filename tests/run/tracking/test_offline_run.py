"""An offline W&B run, read back from its files (tests/run/tracking/offline_run.py says how), holds what a
researcher looks for: score per context length on a `length` x-axis, every task x length in the
summary, the complete per-question table after a resume, the run folder's files as an artifact,
and the first, stopped process marked incomplete.

The run (the `resumed` fixture, tests/run/tracking/conftest.py): 4 examples at two lengths, stopped after
2 and resumed. Expected values come from records.jsonl, averaged here by hand.
"""

import json
from collections import defaultdict
from pathlib import Path

import pytest
from offline_run import manifest_files, md5_b64


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]


def by_length(recs: list[dict]) -> dict[int, float]:
    scores = defaultdict(list)
    for r in recs:
        scores[int(r["length"])].append(r["score"])
    return {n: sum(s) / len(s) for n, s in scores.items()}


def test_the_run_has_a_readable_name_tags_and_the_resolved_config(resumed):
    folder, (_, last) = resumed
    assert last.name == "ruler | tiny_gdn_random | notebank | chunk_size=128"
    assert {"backbone:tiny_gdn_random", "method:notebank", "bench:ruler", "chunk_size=128"} <= set(last.tags)
    assert last.config["method"]["chunk_size"] == 128 and last.config["run_folder"] == str(folder)


def test_per_length_scores_are_history_on_a_length_axis(resumed):
    folder, (_, last) = resumed
    assert last.step_metrics["ruler/niah_single_1/score"] == "length"
    assert last.step_metrics["ruler/mean/score"] == "length"
    rows = [h for h in last.history if "length" in h]
    expected = by_length(records(folder))
    assert len(set(expected.values())) == 2  # the lengths' means differ: the test tells them apart
    assert [r["length"] for r in rows] == sorted(expected) and len(rows) == 2  # one point per length, in order
    for r in rows:
        assert r["ruler/niah_single_1/score"] == pytest.approx(expected[r["length"]], abs=0.01)
        assert r["ruler/mean/score"] == pytest.approx(expected[r["length"]], abs=0.01)
        assert r["ruler/added_flops_ratio"] > 0  # NoteBank replays notes: it adds FLOPs


def test_the_summary_holds_every_task_and_length_and_the_overall_score(resumed):
    folder, (_, last) = resumed
    recs = records(folder)
    for n, mean in by_length(recs).items():
        assert last.summary[f"ruler/niah_single_1/{n}/score"] == pytest.approx(mean, abs=0.01)
        assert last.summary[f"ruler/niah_single_1/{n}/n"] == 2
        assert last.summary[f"ruler/mean/{n}/score"] == pytest.approx(mean, abs=0.01)
    overall = sum(r["score"] for r in recs) / len(recs)
    assert last.summary["ruler/overall/score"] == pytest.approx(overall, abs=0.01)
    assert last.summary["ruler/niah_single_1/score"] == pytest.approx(overall, abs=0.01)
    assert last.summary["memexp/complete"] is True and "incomplete" not in last.tags


def test_the_table_after_a_resume_holds_every_question(resumed):
    folder, (first, last) = resumed
    recs = records(folder)
    table = last.table("ruler/records")
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert len(rows) == 4 == len(recs)
    assert len(first.table("ruler/records")["data"]) == 2  # the first process saw only its own two
    assert [h["progress/questions"] for h in last.history if "progress/questions" in h] == [3, 4]
    for row, rec in zip(rows, recs):
        assert (row["example_id"], row["question_id"], row["prediction"], row["score"]) == (
            rec["example_id"], rec["question_id"], rec["prediction"], rec["score"])
        assert row["question"] == rec["question"] and "?" in row["question"]  # the question's text
        assert row["references"] == " | ".join(rec["references"])
        assert row["tokens/context"] == rec["tokens"]["context"] and row["tokens/replay"] == rec["tokens"]["replay"]
        assert row["seconds/generate"] == rec["seconds"]["generate"] > 0
        notes = [e["text"] for e in rec["method_stats"]["selected"]]
        assert notes and row["replayed_notes"] == "\n---\n".join(notes)


def test_the_run_folder_files_are_an_artifact(resumed):
    folder, (_, last) = resumed
    art = last.artifact("memexp-run")
    assert art.name == f"ruler-{folder.name}" and "complete" in art.aliases
    files = manifest_files(art)
    assert set(files) == {"records.jsonl", "summary.json", "config.yaml"}
    for name, (digest, staged) in files.items():
        assert digest == md5_b64(folder / name)
        assert Path(staged).read_bytes() == (folder / name).read_bytes()
    assert json.loads(Path(files["records.jsonl"][1]).read_text().splitlines()[-1])["example_id"] == \
        records(folder)[-1]["example_id"]


def test_the_stopped_first_process_is_marked_incomplete(resumed):
    _, (first, _) = resumed
    assert "incomplete" in first.tags and first.summary["memexp/complete"] is False
    assert "incomplete" in first.artifact("memexp-run").aliases
    # no per-length points from a partial run: the resume logs them once, complete
    assert not [h for h in first.history if "length" in h]
    assert [h["progress/questions"] for h in first.history if "progress/questions" in h] == [1, 2]
