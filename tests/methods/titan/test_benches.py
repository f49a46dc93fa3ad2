"""QuALITY and LongHealth run end to end with method=titan on the tiny random Llama, through the
runner as `memexp run` would (the contexts span several segments, so the memory writes and reads)."""

import json

import pytest

from memexp.benchmarks.quality.benchmark import file_name
from memexp.core.compose import load_config
from memexp.run.runner import run

TITAN = ["backbone=tiny_llama_random", "method=titan", "method.layers=2", "method.segment_length=16",
         "method.test_batch=32", "logger=none", "progress=false"]


def quality_set(article_id, writer, questions):
    article = "Once upon a time there was a red door.\n\nBehind it, a green garden. The end. "
    return {"article_id": article_id, "set_unique_id": f"{article_id}_{writer}", "batch_num": "1",
            "writer_id": writer, "source": "Gutenberg", "title": f"Title {article_id}", "author": "A", "topic": "",
            "url": "", "year": "1950", "license": "", "article": article,
            "questions": [{"question": q, "options": ["red", "green", "blue", "white"], "gold_label": gold,
                           "writer_label": gold, "validation": [], "speed_validation": [], "difficult": 0}
                          for q, gold in questions]}


def longhealth_patient(pid):
    def question(i):
        q = {"No": i, "question": f"Question {i}?", "correct": f"option c{i}",
             "answer_location": {"text_0": {"start": [0.1], "end": [0.2]}}}
        q.update({f"answer_{label}": f"option {label}{i}" for label in "abcde"})
        return q

    return {"name": pid, "texts": {f"text_{t}": f"Letter {t} of {pid}: all is well." for t in range(3)},
            "questions": [question(i) for i in range(2)]}


@pytest.mark.parametrize("bench", ["quality", "longhealth"])
def test_titan_runs_the_bench_end_to_end(tmp_path, bench):
    if bench == "quality":
        (tmp_path / file_name("dev")).write_text(json.dumps(quality_set("A1", "w1", [("Door?", 1), ("Garden?", 2)])))
        extra, expected = [f"bench.data_path={tmp_path}"], (1, 2)
    else:
        path = tmp_path / "benchmark_v5.json"
        path.write_text(json.dumps({"p1": longhealth_patient("p1")}))
        extra, expected = [f"bench.data_path={path}", "bench.tasks=[task1]"], (1, 2)
    cfg = load_config([*TITAN, f"bench={bench}", "bench.max_new_tokens=2", f"output_dir={tmp_path / 'runs'}", *extra])
    summary = run(cfg)
    assert summary["complete"] and (summary["num_examples"], summary["num_questions"]) == expected
    records = [json.loads(line) for line in next((tmp_path / "runs").rglob("records.jsonl")).read_text().splitlines()]
    assert len(records) == expected[1]
    assert all(r["tokens"]["context"] > 2 * 16 for r in records)  # the memory completed chunks and was read
