"""LongBench v2: the 0shot prompt, middle truncation, subset filter, parser, result.py columns."""

import json

import pytest

from memexp.backbones.tokenizer import ByteTokenizer
from memexp.benchmarks.longbench_v2.benchmark import LongBenchV2, render
from memexp.benchmarks.longbench_v2.config import LongBenchV2Config
from memexp.core.schema import ConfigError
from memexp.core.types import Question, Record

TOK = ByteTokenizer()


def record(i, domain="Single-Document QA", sub_domain="Legal", difficulty="easy", length="short",
           context="  The document.\n"):
    return {"_id": f"id{i}", "domain": domain, "sub_domain": sub_domain, "difficulty": difficulty, "length": length,
            "question": f" Which one {i}? ", "choice_A": "alpha ", "choice_B": " beta", "choice_C": "gamma",
            "choice_D": "delta", "answer": "B", "context": context}


def write(path, records):
    path.write_text(json.dumps(records))
    return path


def bench(path, **kw):
    return LongBenchV2(LongBenchV2Config(data_path=str(path), **kw))


def test_prompt_is_the_filled_0shot_template():
    context, prompt = render(record(1))
    assert context + prompt == (
        "Please read the following text and answer the question below.\n\n<text>\nThe document.\n</text>\n\n"
        "What is the correct answer to this question: Which one 1?\nChoices:\n(A) alpha\n(B) beta\n(C) gamma\n"
        "(D) delta\n\nFormat your response as follows: \"The correct answer is (insert answer here)\".")
    assert context.endswith("The document.\n</text>\n\n")
    assert prompt.startswith("What is the correct answer")


def test_document_containing_the_closing_tag_still_splits_after_it():
    context, prompt = render(record(1, context="a </text>\n\n b"))
    assert context.endswith("a </text>\n\n b\n</text>\n\n") and prompt.startswith("What is")


def test_loader_filters_the_paper_subset(tmp_path):
    records = [
        record(0),
        record(1, domain="Multi-Document QA"),
        record(2, domain="Long-dialogue History Understanding", sub_domain="Agent history QA"),
        record(3, domain="Long In-context Learning", sub_domain="User guide QA"),
        record(4, domain="Long In-context Learning", sub_domain="Many-shot learning"),
        record(5, domain="Code Repository Understanding", sub_domain="Code repo QA"),
    ]
    path = write(tmp_path / "data.json", records)
    examples = list(bench(path).examples(TOK))
    assert [e.id for e in examples] == ["id0", "id1", "id2", "id3"]
    ex = examples[0]
    assert (ex.task, ex.length, ex.questions[0].references, ex.questions[0].max_new_tokens) == (
        "Single-Document QA", "short", ["B"], 128)
    everything = bench(path, domains=[], sub_domains=[])
    assert len(list(everything.examples(TOK))) == 6
    assert [e.id for e in bench(tmp_path, domains=["Code Repository Understanding"], sub_domains=[])
            .examples(TOK)] == ["id5"]


@pytest.mark.parametrize("max_length", [600, 601])
def test_truncation_keeps_floor_half_then_ceil_half(tmp_path, max_length):
    doc = "".join(f"[{i:03d}]" for i in range(200))
    path = write(tmp_path / "data.json", [record(0, context=doc)])
    ex = next(bench(path, max_length=max_length).examples(TOK))
    context, prompt = render(record(0, context=doc))
    full = [TOK.bos_id] + TOK.encode(context + prompt)
    kept = TOK.encode(ex.context, add_bos=True) + TOK.encode(ex.questions[0].prompt)
    assert kept == full[: max_length // 2] + full[-(max_length - max_length // 2):]
    assert len(kept) == max_length


def test_skip_mode_drops_prompts_that_do_not_fit(tmp_path):
    path = write(tmp_path / "data.json", [record(0, context="x" * 1000), record(1)])
    assert [e.id for e in bench(path, max_length=600, overlength="skip").examples(TOK)] == ["id1"]
    assert len(list(bench(path, max_length=None).examples(TOK))) == 2


def test_skip_reserves_template_replay_and_generation(tmp_path):
    path = write(tmp_path / "data.json", [record(0), record(1, context="x" * 200)])
    context, prompt = render(record(0))
    prompt_len = len(context) + 1 + len(prompt)  # bytes + BOS
    # exactly at the budget: kept; one reserved token more: skipped
    kw = dict(overlength="skip", max_new_tokens=5, reserve_replay=40, reserve_template=7, domains=[], sub_domains=[])
    b = bench(path, max_length=prompt_len + 52, **kw)
    assert [e.id for e in b.examples(TOK)] == ["id0"] and b.skipped() == ["id1"]
    b = bench(path, max_length=prompt_len + 51, **kw)
    assert list(b.examples(TOK)) == [] and b.skipped() == ["id0", "id1"]
    kept = next(bench(path, max_length=prompt_len + 52, **kw).examples(TOK))
    assert kept.context == context  # never truncated


def test_truncate_mode_reserves_nothing_and_skips_nothing(tmp_path):
    path = write(tmp_path / "data.json", [record(0)])
    context, prompt = render(record(0))
    b = bench(path, max_length=len(context) + 1 + len(prompt), reserve_replay=100, max_new_tokens=50)
    assert next(b.examples(TOK)).context == context and b.skipped() == []


def test_skipped_examples_are_listed_in_the_summary_not_scored(tmp_path):
    import memexp.run.runner as runner
    from memexp.core.compose import load_config

    path = write(tmp_path / "data.json", [record(0, context="x" * 1000), record(1), record(2, context="y" * 900)])
    cfg = load_config(["backbone=tiny_gdn_random", "method=plain", "bench=longbench_v2", f"bench.data_path={path}",
                       "bench.max_length=600", "bench.overlength=skip", "bench.max_new_tokens=3",
                       f"output_dir={tmp_path / 'runs'}", "progress=false", "logger=none"])
    summary = runner.run(cfg)
    assert (summary["num_skipped"], summary["skipped"]) == (2, ["id0", "id2"])
    assert summary["num_questions"] == 1 and summary["num_examples"] == 1 and summary["complete"]
    (written,) = (tmp_path / "runs").glob("*/*/*/*/summary.json")
    assert json.loads(written.read_text())["skipped"] == ["id0", "id2"]


def test_score_uses_the_official_parser():
    q = Question(id="0", prompt="", references=["B"], metric="accuracy", max_new_tokens=8)
    b = LongBenchV2()
    assert b.score("The correct answer is (B)", q) == 100.0
    assert b.score("**The correct answer is B**", q) == 100.0
    assert b.score("B", q) == 0.0
    assert b.score("The correct answer is (C)", q) == 0.0


def test_aggregate_has_result_py_columns(tmp_path):
    records = [record(0, difficulty="easy", length="short"), record(1, difficulty="hard", length="short"),
               record(2, difficulty="hard", length="long")]
    path = write(tmp_path / "data.json", records)
    b = bench(path, domains=[], sub_domains=[])
    examples = list(b.examples(TOK))
    scores = [100.0, 0.0, 100.0]
    recs = [Record(example_id=e.id, question_id="0", task=e.task, length=e.length, score=s)
            for e, s in zip(examples, scores)]
    assert b.aggregate(recs) == {"overall": 66.7, "easy": 100.0, "hard": 50.0, "short": 50.0, "long": 100.0}


def test_overlength_is_validated():
    with pytest.raises(ConfigError, match="bench.overlength"):
        LongBenchV2Config(overlength="drop")
    with pytest.raises(ConfigError, match="bench.reserve_replay"):
        LongBenchV2Config(reserve_replay=-1)


def test_runs_end_to_end(tmp_path):
    from helpers.memexp_process import memexp_run

    path = write(tmp_path / "data.json", [record(0), record(1, difficulty="hard", length="long", context="y" * 900)])
    summary = memexp_run(tmp_path, "bench=longbench_v2", f"bench.data_path={path}", "bench.max_new_tokens=3",
                         "bench.max_length=512")
    assert summary["complete"] and summary["num_questions"] == 2
    assert {"aggregate/overall", "aggregate/easy", "aggregate/hard", "aggregate/short", "aggregate/long"} <= set(summary)
