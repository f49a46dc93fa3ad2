"""MemoryAgentBench: chunking, memorise/query wrappers, truncation, loading, scoring, Table 6."""

import json
import logging

import pytest

import memexp.benchmarks.memoryagentbench.benchmark as mab
from memexp.backbones.tokenizer import ByteTokenizer
from memexp.benchmarks.datasets import BenchmarkDataError
from memexp.benchmarks.memoryagentbench.benchmark import CHUNKS_FIELD, MemoryAgentBench, memory_text, qa_pairs
from memexp.benchmarks.memoryagentbench.chunks import approximate_chunks, pack_sentences
from memexp.benchmarks.memoryagentbench.config import MEMORYAGENTBENCH_TASKS, MemoryAgentBenchConfig
from memexp.benchmarks.memoryagentbench.tasks import TASKS
from memexp.core.types import Question, Record

TOK = ByteTokenizer()
LONG = " ".join(f"Fact {i} is that item {i} has value {i * 7}." for i in range(80))  # > 2000 characters


def row(source, questions=("Who?", "What?"), answers=(["Ann"], ["a cat", "cat"]), context=LONG, chunks=None):
    r = {"context": context, "questions": list(questions), "answers": [list(a) for a in answers],
         "metadata": {"source": source, "demo": "", "haystack_sessions": [], "keypoints": [], "previous_events": [],
                      "qa_pair_ids": [], "question_dates": [], "question_ids": [], "question_types": []}}
    if chunks is not None:
        r[CHUNKS_FIELD] = {"chunk_size": 4096, "chunks": chunks}
    return r


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def bench(path, **kw):
    kw.setdefault("time_stamp", "T")
    return MemoryAgentBench(MemoryAgentBenchConfig(data_path=str(path), **kw))


def test_task_table_matches_the_config():
    assert tuple(TASKS) == MEMORYAGENTBENCH_TASKS
    assert {s: (t.max_new_tokens, t.max_contexts) for s, t in TASKS.items() if "262k" in s or "full" in s
            or "qa1" in s} == {"factconsolidation_sh_262k": (10, 1), "factconsolidation_mh_262k": (10, 1),
                               "eventqa_full": (40, 5), "ruler_qa1_197K": (50, 100)}


def test_greedy_packing_with_the_official_quirk():
    words = lambda s: len(s.split())  # noqa: E731
    assert pack_sentences(["a b c", "d e", "f g h i j k"], 5, words) == ["a b c d e", "f g h i j k"]
    # a first sentence over the budget closes an empty chunk first, as the official loop does
    assert pack_sentences(["x y z w", "v"], 3, words) == ["", "x y z w", "v"]
    assert pack_sentences([], 3, words) == []


def test_approximate_chunks_count_backbone_tokens():
    text = "One two. Three four! Five six? Seven."
    assert approximate_chunks(text, 20, TOK) == ["One two. Three four!", "Five six? Seven."]


def test_context_and_prompt_are_what_the_long_context_agent_sends(tmp_path):
    path = write(tmp_path / "ruler_qa1_197K.jsonl", [row("ruler_qa1_197K", chunks=["Chunk one.", "Chunk two."])])
    ex = next(bench(tmp_path, tasks=["ruler_qa1_197K"]).examples(TOK))
    assert path.exists()
    wrap = ("\nDialogue between User and Assistant T\\n<User> The following context is the documents I have read: "
            "\n{}\n <Assistant> I have learned the documents and I will answer the question you ask.")
    # agent.py: the memory is stripped after each append, so no "\n" before the first chunk
    assert ex.context == (wrap.format("Chunk one.") + wrap.format("Chunk two."))[1:]
    assert "\\n<User>" in ex.context  # the literal backslash-n of the official template
    q = ex.questions[0]
    assert q.prompt == ("\nAnswer the question based on the memorized documents. Only give me the answer and do "
                        "not output any other words. \n\nQuestion: Who? \n\n Answer:")
    assert (q.references, q.max_new_tokens, ex.task, ex.length) == (["Ann"], 50, "ruler_qa", "197k")
    assert ex.questions[1].references == ["a cat", "cat"]
    assert ex.system.startswith("You are a helpful assistant that can read the context")


def test_factconsolidation_and_eventqa_templates(tmp_path):
    write(tmp_path / "factconsolidation_mh_6k.jsonl", [row("factconsolidation_mh_6k", chunks=["0. A is B."])])
    write(tmp_path / "eventqa_65536.jsonl", [row("eventqa_65536", chunks=["He left."])])
    fact, event = bench(tmp_path, tasks=["factconsolidation_mh_6k", "eventqa_65536"]).examples(TOK)
    assert fact.context.startswith("Dialogue between User and Assistant T \\n<User> The following context is the "
                                   "facts I have learned: \n0. A is B.\n <Assistant>")
    assert fact.questions[0].prompt.endswith("Now Answer the Question: Based on the provided Knowledge Pool, "
                                             "Who? \nAnswer:")
    assert fact.questions[0].prompt.startswith("\nPretend you are a knowledge management system.")
    assert event.questions[0].prompt == ("\nBased on the context you memorized, complete the task below:\n\nWho?\n\n "
                                         "The event that happens next is:")
    assert (fact.task, fact.length, event.task, event.length) == ("factconsolidation_multi_hop", "6k", "eventqa", "64k")


def test_stored_chunks_are_used_only_for_their_chunk_size(tmp_path, monkeypatch):
    write(tmp_path / "ruler_qa2_421K.jsonl", [row("ruler_qa2_421K", chunks=["Stored."])])
    calls = []
    monkeypatch.setattr(mab, "official_chunks", lambda text, size: calls.append(size) or ["Fresh."])
    assert "Stored." in next(bench(tmp_path, tasks=["ruler_qa2_421K"]).examples(TOK)).context
    assert calls == []
    assert "Fresh." in next(bench(tmp_path, tasks=["ruler_qa2_421K"], chunk_size=512).examples(TOK)).context
    assert calls == [512]


def test_official_schema_rows_with_approximate_chunking(tmp_path):
    write(tmp_path / "all.jsonl", [row("eventqa_full"), row("ruler_qa1_197K", questions=["Q"], answers=[["x"]])])
    ex = next(bench(tmp_path / "all.jsonl", tasks=["eventqa_full"], chunker="approximate", chunk_size=600)
              .examples(TOK))
    # 80 sentences, 3,003 bytes without the joining spaces, packed at most 600 bytes a chunk
    assert ex.context.count("<User> The following context is the book excerpt") == 6
    assert ex.context.replace("\n <Assistant>", "").count("Fact 79 is that item 79 has value 553.") == 1


def test_qa_pairs_follow_the_conversation_creator():
    assert qa_pairs({"questions": ["a", "b"], "answers": [["1"], ["2", "3"]]}) == [("a", ["1"]), ("b", ["2", "3"])]
    # one question takes every answer, nested lists flattened
    assert qa_pairs({"questions": ["a"], "answers": [["1", "2"], ["3"]]}) == [("a", ["1", "2", "3"])]
    assert qa_pairs({"questions": "a", "answers": "1"}) == [("a", ["1"])]


def test_context_limits_and_question_limits(tmp_path):
    rows = [row("eventqa_131072", questions=[f"q{j}" for j in range(4)], answers=[[str(j)] for j in range(4)])
            for _ in range(7)]
    write(tmp_path / "eventqa_131072.jsonl", rows)
    examples = list(bench(tmp_path, tasks=["eventqa_131072"], chunker="approximate", max_questions=3)
                    .examples(TOK))
    assert len(examples) == 5  # max_test_samples of the official config
    assert [q.id for q in examples[0].questions] == ["0", "1", "2"]
    assert [e.id for e in examples] == [f"eventqa_131072/{i}" for i in range(5)]


def test_truncation_follows_the_agent_window(tmp_path):
    write(tmp_path / "factconsolidation_sh_6k.jsonl", [row("factconsolidation_sh_6k", chunks=[LONG])])
    full = next(bench(tmp_path, tasks=["factconsolidation_sh_6k"]).examples(TOK)).context
    # window = limit - 4000 (buffer) - 10 (generation) = 500 <= 6000 + 50000: keep the last 500 tokens
    cut = next(bench(tmp_path, tasks=["factconsolidation_sh_6k"], input_length_limit=4510).examples(TOK)).context
    assert cut == full[-500:]
    # a window wider than context_max_length + 50000 leaves the memory whole
    wide = next(bench(tmp_path, tasks=["factconsolidation_sh_6k"], input_length_limit=70_000).examples(TOK))
    assert wide.context == full


def test_malformed_and_short_contexts_are_reported(tmp_path, caplog):
    path = write(tmp_path / "ruler_qa1_197K.jsonl", [
        row("ruler_qa1_197K", context="too short", chunks=[]),
        {"context": LONG, "metadata": {"source": "ruler_qa1_197K"}},
        row("ruler_qa1_197K", chunks=["ok."]),
    ])
    with caplog.at_level(logging.WARNING, logger="memexp.cli.data"):
        examples = list(bench(tmp_path, tasks=["ruler_qa1_197K"]).examples(TOK))
    assert [e.id for e in examples] == ["ruler_qa1_197K/2"]
    messages = [r.getMessage() for r in caplog.records]
    assert f"{path} row 1: context has 9 characters; MemoryAgentBench needs > 2000 (skipped)" in messages
    assert f"{path} row 2: missing field 'questions' (skipped)" in messages


def test_missing_source_file_is_one_clear_error(tmp_path):
    with pytest.raises(BenchmarkDataError, match="eventqa_full.jsonl not found.*python -m memexp data"):
        next(bench(tmp_path, tasks=["eventqa_full"]).examples(TOK))


def question(family, refs):
    return Question(id="0", prompt="", references=refs, metric="substring_exact_match", max_new_tokens=8,
                    meta={"family": family})


def test_scores_raw_or_parsed_output_per_family():
    b = MemoryAgentBench()
    # ruler_qa / factconsolidation: max over the raw output and the parsed answer
    assert b.score("Paris is it.\nAnswer: London", question("ruler_qa", ["Paris"])) == 100.0
    assert b.score("Answer: the Paris", question("factconsolidation", ["paris"])) == 100.0
    assert b.score("Berlin", question("factconsolidation", ["Paris"])) == 0.0
    # eventqa: only the parsed answer (first line, or what follows "Answer:")
    assert b.score("He leaves the house.\nThen Paris.", question("eventqa", ["Paris"])) == 0.0
    assert b.score("Paris burns.\nmore", question("eventqa", ["paris burns"])) == 100.0


def test_aggregate_is_table_6():
    cells = {("factconsolidation_single_hop", "6k"): [100, 0], ("factconsolidation_single_hop", "32k"): [0],
             ("eventqa", "64k"): [100], ("ruler_qa", "197k"): [0, 0, 100, 100]}
    records = [Record(example_id=f"{t}/{n}", question_id=str(i), task=t, length=n, score=s)
               for (t, n), ss in cells.items() for i, s in enumerate(ss)]
    assert MemoryAgentBench().aggregate(records) == {
        "eventqa": 100.0, "factconsolidation_single_hop": 25.0, "ruler_qa": 50.0,
        "overall": 50.0,  # mean over configurations: (50 + 0 + 100 + 50) / 4
    }


def test_runs_end_to_end(tmp_path):
    from helpers.memexp_process import memexp_run

    write(tmp_path / "data.jsonl", [row("factconsolidation_sh_6k"), row("ruler_qa2_421K", chunks=["Stored."])])
    summary = memexp_run(tmp_path, "bench=memoryagentbench", f"bench.data_path={tmp_path / 'data.jsonl'}",
                         "bench.tasks=[factconsolidation_sh_6k,ruler_qa2_421K]", "bench.chunker=approximate",
                         "bench.chunk_size=1024")
    assert summary["complete"] and (summary["num_examples"], summary["num_questions"]) == (2, 4)
    assert {"aggregate/factconsolidation_single_hop", "aggregate/ruler_qa", "aggregate/overall"} <= set(summary)


def test_a_context_with_k_questions_is_read_once(tmp_path, monkeypatch):
    import memexp.backbones
    from memexp.core.compose import load_config
    from memexp.run.runner import run

    k = 6
    data_file = write(tmp_path / "data.jsonl", [row("eventqa_65536", questions=[f"Q{j}?" for j in range(k)],
                                                    answers=[[f"a{j}"] for j in range(k)])])
    backbone = memexp.backbones.load_backbone("tiny_gdn_random")
    context = next(bench(data_file, tasks=["eventqa_65536"], chunker="approximate").examples(TOK)).context
    context_len = len(backbone.tokenizer.encode(context, add_bos=True))
    lengths = []
    forward = backbone.forward

    def counting_forward(state, ids, observer=None):
        lengths.append(len(ids))
        return forward(state, ids, observer)

    backbone.forward = counting_forward
    monkeypatch.setattr(memexp.backbones, "load_backbone", lambda spec: backbone)
    cfg = load_config(["bench=memoryagentbench", "backbone=tiny_gdn_random", "method=plain", "logger=none",
                       f"bench.data_path={data_file}", "bench.tasks=[eventqa_65536]", "bench.chunker=approximate",
                       "bench.time_stamp=T", f"output_dir={tmp_path / 'runs'}", "progress=false"])
    summary = run(cfg)
    assert summary["num_questions"] == k
    assert lengths.count(context_len) == 1  # one read of the context for all k questions
    assert sum(lengths) < 2 * context_len  # the rest is k questions and their few generated tokens


def test_data_command_stores_the_official_chunks(tmp_path, monkeypatch):
    from memexp.benchmarks import datasets as data
    from memexp.cli.data import download

    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    splits = []

    def fake_hub_rows(repo_id, split, revision=None):
        splits.append((repo_id, split, revision))
        sources = [s for s, t in TASKS.items() if t.split == split]
        return iter([row(s, chunks=None) for s in sources for _ in range(2)] + [row("longmemeval_s")])

    monkeypatch.setattr(data, "hub_rows", fake_hub_rows)
    monkeypatch.setattr(mab, "official_tools", lambda: (lambda text: text.split(". "), lambda s: len(s.split())))
    cfg = MemoryAgentBenchConfig(cache_dir=str(tmp_path / "cache"), chunk_size=100, time_stamp="T")
    path = download(cfg)
    assert splits == [("ai-hyz/MemoryAgentBench", "Accurate_Retrieval", "main"),
                      ("ai-hyz/MemoryAgentBench", "Conflict_Resolution", "main")]
    assert sorted(p.stem for p in path.glob("*.jsonl")) == sorted(TASKS)
    stored = [json.loads(line) for line in (path / "eventqa_full.jsonl").read_text().splitlines()]
    assert len(stored) == 2 and stored[0][CHUNKS_FIELD]["chunk_size"] == 100
    (fact,) = [json.loads(line) for line in (path / "factconsolidation_sh_6k.jsonl").read_text().splitlines()]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(mab, "official_chunks", lambda *a: pytest.fail("stored chunks must be used"))
    ex = next(MemoryAgentBench(cfg).examples(TOK))  # factconsolidation_sh_6k: one context (max_test_samples)
    assert ex.context.count("<User>") == len(fact[CHUNKS_FIELD]["chunks"]) > 1


def official_memory(wrapped: list[str]) -> str:
    """agent.py _handle_long_context_agent, one append at a time."""
    context = ""
    for message in wrapped:
        context += "\n" + message
        context = context.strip()
    return context


@pytest.mark.parametrize("wrapped", [
    ["a", "b"],
    ["  lead\n", "\n\ttwo  ", "three\n\n"],
    ["   ", "x", " \n ", "  y  "],
    ["\n", "\n"],
    [],
])
def test_memory_text_is_the_agents_memory_after_each_stripped_append(wrapped):
    assert memory_text(wrapped) == official_memory(wrapped)


def test_memory_starts_with_the_first_wrapped_chunk(tmp_path):
    write(tmp_path / "ruler_qa1_197K.jsonl", [row("ruler_qa1_197K", chunks=["Chunk one."])])
    ex = next(bench(tmp_path, tasks=["ruler_qa1_197K"]).examples(TOK))
    assert ex.context.startswith("Dialogue between User and Assistant T\\n<User>")


def test_a_single_files_rows_without_a_known_source_are_counted(tmp_path):
    from memexp.benchmarks import skipped_rows

    source = next(iter(TASKS))
    unnamed = row(source)
    unnamed["metadata"] = {}
    path = write(tmp_path / "all.jsonl", [row(source), unnamed, row("no_such_source"), ["a list"]])
    with skipped_rows.collecting() as skipped:
        examples = list(bench(path, tasks=[source], chunker="approximate").examples(TOK))
    assert len(examples) == 1
    rows = {r["row"]: r["problem"] for item in skipped.summary()["by_reason"].values() for r in item["rows"]}
    assert rows == {2: "missing field 'metadata.source'",
                    3: "metadata.source is not a subset of this benchmark ('no_such_source')",
                    4: "expected a JSON object, got list"}
