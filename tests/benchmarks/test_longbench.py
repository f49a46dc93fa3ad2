"""LongBench v1: official prompts, truncation, loading, post-processing, scores, Table 1."""

import json
import logging

import pytest

from memexp.backbones.tokenizer import ByteTokenizer
from memexp.benchmarks.datasets import BenchmarkDataError
from memexp.benchmarks.longbench.benchmark import LongBench, length_bucket, render
from memexp.benchmarks.longbench.config import LONGBENCH_TASKS, LongBenchConfig
from memexp.benchmarks.longbench.tasks import TASKS
from memexp.benchmarks.truncation import longbench_ends, middle_truncate
from memexp.core.types import Question, Record

TOK = ByteTokenizer()


def record(subset, i=0, context="Passage one. Passage two.", words=1200):
    return {
        "input": f"What is {i}?" if subset not in ("gov_report", "multi_news") else "",
        "context": context,
        "answers": [f"answer {i}"],
        "length": words,
        "dataset": subset,
        "language": "en",
        "all_classes": ["Location", "Number", "Human being"] if subset == "trec" else None,
        "_id": f"{subset}-{i}",
    }


def write_subsets(folder, rows_per_subset=3):
    for subset in LONGBENCH_TASKS:
        with open(folder / f"{subset}.jsonl", "w") as f:
            for i in range(rows_per_subset):
                f.write(json.dumps(record(subset, i, words=[1200, 5000, 9000][i % 3])) + "\n")
    return folder


def bench(folder, **kw):
    return LongBench(LongBenchConfig(data_path=str(folder), **kw))


def test_task_table_matches_the_config_and_the_official_limits():
    assert tuple(TASKS) == LONGBENCH_TASKS
    assert {n: t.max_new_tokens for n, t in TASKS.items()} == {
        "narrativeqa": 128, "qasper": 128, "multifieldqa_en": 64, "hotpotqa": 32, "2wikimqa": 32, "musique": 32,
        "gov_report": 512, "qmsum": 512, "multi_news": 512, "trec": 64, "triviaqa": 32, "samsum": 128}
    assert {n for n, t in TASKS.items() if not t.chat_template} == {"trec", "triviaqa", "samsum"}


def test_prompts_render_the_official_strings():
    rec = {"context": "CTX", "input": "Q?"}
    context, prompt = render(TASKS["narrativeqa"], rec)
    assert context + prompt == (
        "You are given a story, which can be either a novel or a movie script, and a question. Answer the question "
        "asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: CTX\n\n"
        "Now, answer the question based on the story asconcisely as you can, using a single phrase if possible. "
        "Do not provide any explanation.\n\nQuestion: Q?\n\nAnswer:")
    assert context.endswith("Story: CTX")
    context, prompt = render(TASKS["qasper"], rec)
    assert context.endswith("Article: CTX") and prompt.startswith("\n\n Answer the question based on the above")
    assert prompt.endswith('"unanswerable". Do not provide any explanation.\n\nQuestion: Q?\n\nAnswer:')
    assert render(TASKS["trec"], rec) == (
        "Please determine the type of the question below. Here are some examples of questions.\n\nCTX", "\nQ?")
    assert render(TASKS["samsum"], rec) == (
        "Summarize the dialogue into a few short sentences. The following are some examples.\n\nCTX", "\n\nQ?")
    assert render(TASKS["gov_report"], {"context": "CTX", "input": ""}) == (
        "You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\nCTX",
        "\n\nNow, write a one-page summary of the report.\n\nSummary:")


@pytest.mark.parametrize("subset", LONGBENCH_TASKS)
def test_every_prompt_is_the_formatted_template_split_after_the_document(subset):
    rec = record(subset, context="A {braced} document.")
    context, prompt = render(TASKS[subset], rec)
    assert context + prompt == TASKS[subset].template.format(**rec)
    assert context.endswith(rec["context"])


@pytest.mark.parametrize("max_length", [600, 601])
def test_truncation_keeps_half_the_budget_from_each_end(tmp_path, max_length):
    long_context = "".join(f"<{i:04d}>" for i in range(400))
    (tmp_path / "hotpotqa.jsonl").write_text(json.dumps(record("hotpotqa", context=long_context)) + "\n")
    ex = next(bench(tmp_path, tasks=["hotpotqa"], max_length=max_length).examples(TOK))
    full_context, prompt = render(TASKS["hotpotqa"], record("hotpotqa", context=long_context))
    full = [TOK.bos_id] + TOK.encode(full_context + prompt)
    half = max_length // 2
    kept = TOK.encode(ex.context, add_bos=True) + TOK.encode(ex.questions[0].prompt)
    assert kept == full[:half] + full[-half:]
    assert ex.questions[0].prompt == prompt


def test_no_truncation_within_budget(tmp_path):
    write_subsets(tmp_path, 1)
    ex = next(bench(tmp_path, tasks=["qasper"], max_length=10_000).examples(TOK))
    assert ex.context == render(TASKS["qasper"], record("qasper"))[0]


def test_loader_reads_the_official_schema(tmp_path):
    write_subsets(tmp_path)
    examples = list(bench(tmp_path, num_samples=2).examples(TOK))
    assert len(examples) == 2 * 12
    first = examples[0]
    assert (first.id, first.task, first.length) == ("narrativeqa/narrativeqa-0", "narrativeqa", "0-4k")
    assert [e.length for e in examples[:2]] == ["0-4k", "4-8k"]
    q = first.questions[0]
    assert (q.references, q.metric, q.max_new_tokens) == (["answer 0"], "qa_f1", 128)
    trec = next(e for e in examples if e.task == "trec").questions[0]
    assert trec.metric == "classification" and trec.meta["all_classes"] == ["Location", "Number", "Human being"]
    samsum = next(e for e in examples if e.task == "samsum").questions[0]
    assert (samsum.stop, samsum.min_new_tokens, samsum.chat_template) == (["\n"], 1, False)
    assert (q.stop, q.min_new_tokens) == ([], 0)


def test_default_takes_the_first_30_rows(tmp_path):
    with open(tmp_path / "musique.jsonl", "w") as f:
        for i in range(35):
            f.write(json.dumps(record("musique", i)) + "\n")
    ids = [e.id for e in bench(tmp_path, tasks=["musique"]).examples(TOK)]
    assert ids == [f"musique/musique-{i}" for i in range(30)]


def test_single_file_with_dataset_field(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(record(s, i)) for s in ("trec", "qmsum") for i in range(2)) + "\n")
    examples = list(bench(path, tasks=["qmsum"]).examples(TOK))
    assert [e.id for e in examples] == ["qmsum/qmsum-0", "qmsum/qmsum-1"]


def _mixed_file(tmp_path):
    """One file of every subset with rows a folder's loader would skip, and rows no subset takes."""
    no_dataset = {k: v for k, v in record("qmsum", 9).items() if k != "dataset"}
    rows = [json.dumps(record("qmsum", 0)), json.dumps(no_dataset), json.dumps(record("nope", 1)), "[1, 2]",
            "{not json", json.dumps(record("trec", 0))]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_single_files_rows_without_a_subset_are_counted_once(tmp_path):
    from memexp.benchmarks import skipped_rows

    path = _mixed_file(tmp_path)
    with skipped_rows.collecting() as skipped:
        ids = [e.id for e in bench(path, tasks=["qmsum", "trec"]).examples(TOK)]
    assert ids == ["qmsum/qmsum-0", "trec/trec-0"]
    summary = skipped.summary()
    assert summary["total"] == 4  # each bad row once, though two subsets were read from the file
    rows = {r["row"]: r["problem"] for item in summary["by_reason"].values() for r in item["rows"]}
    assert rows == {2: "missing field 'dataset'", 3: "dataset is not a subset of this benchmark ('nope')",
                    4: "expected a JSON object, got list", 5: rows[5]}
    assert rows[5].startswith("not valid JSON")


def test_a_single_file_run_says_it_skipped_rows(tmp_path):
    """The issue's case: 1 of 3 rows scored, the other two not counted, `complete: true`."""
    from helpers.memexp_process import memexp_run

    path = tmp_path / "mixed.jsonl"
    no_dataset = {k: v for k, v in record("qmsum", 9).items() if k != "dataset"}
    path.write_text("\n".join(json.dumps(r) for r in (record("qmsum", 0), no_dataset, record("nope", 1))) + "\n")
    summary = memexp_run(tmp_path, "bench=longbench", f"bench.data_path={path}", "bench.tasks=[qmsum]",
                         "bench.max_new_tokens=3", "bench.max_length=256")
    assert summary["num_questions"] == 1 and summary["skipped_rows"]["total"] == 2


def test_malformed_rows_are_reported_with_file_and_row(tmp_path, caplog):
    rows = [json.dumps(record("triviaqa", 0)), "{not json",
            json.dumps({k: v for k, v in record("triviaqa", 2).items() if k != "answers"}),
            json.dumps(record("triviaqa", 3, context="   ")), json.dumps(record("triviaqa", 4))]
    (tmp_path / "triviaqa.jsonl").write_text("\n".join(rows) + "\n")
    with caplog.at_level(logging.WARNING, logger="memexp.cli.data"):
        ids = [e.id for e in bench(tmp_path, tasks=["triviaqa"]).examples(TOK)]
    assert ids == ["triviaqa/triviaqa-0", "triviaqa/triviaqa-4"]
    messages = [r.getMessage() for r in caplog.records]
    path = str(tmp_path / "triviaqa.jsonl")
    assert any(m.startswith(f"{path} row 2: not valid JSON") for m in messages)
    assert f"{path} row 3: missing field 'answers' (skipped)" in messages
    assert f"{path} row 4: empty field 'context' (skipped)" in messages


def test_missing_data_offline_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    b = LongBench(LongBenchConfig(cache_dir=str(tmp_path / "cache")))
    with pytest.raises(BenchmarkDataError) as err:
        next(b.examples(TOK))
    message = str(err.value)
    assert "\n" not in message and "python -m memexp data bench=longbench" in message
    with pytest.raises(BenchmarkDataError, match="bench.data_path=.*no such file"):
        next(bench(tmp_path / "nowhere").examples(TOK))


def test_missing_subset_file_names_it(tmp_path):
    with pytest.raises(BenchmarkDataError, match="qasper.jsonl not found"):
        next(bench(tmp_path, tasks=["qasper"]).examples(TOK))


def question(subset, refs, all_classes=None):
    return Question(id="0", prompt="", references=refs, metric=TASKS[subset].metric, max_new_tokens=8,
                    meta={"task": subset, "all_classes": all_classes})


def test_first_line_postprocessing_only_for_the_few_shot_subsets():
    b = LongBench()
    for subset in ("trec", "triviaqa", "samsum"):
        assert b.postprocess("\n\nNumber\nQuestion: next", question(subset, [])) == "Number"
    assert b.postprocess("line one\nline two", question("narrativeqa", [])) == "line one\nline two"


def test_score_uses_each_subsets_metric():
    b = LongBench()
    assert b.score("The cat.", question("hotpotqa", ["cat"])) == 100.0
    assert b.score("the cat", question("gov_report", ["the cat"])) == pytest.approx(100.0)
    assert b.score("Number or Location", question("trec", ["Number"], ["Location", "Number"])) == 50.0


def test_aggregate_is_table_1():
    scores = {"narrativeqa": [10, 30], "qasper": [0], "hotpotqa": [50], "gov_report": [12], "trec": [100, 0]}
    records = [Record(example_id=f"{t}/{i}", question_id="0", task=t, length="0-4k", score=s)
               for t, ss in scores.items() for i, s in enumerate(ss)]
    assert LongBench().aggregate(records) == {
        "single_doc_qa": 10.0,  # mean(20, 0)
        "multi_doc_qa": 50.0,
        "summarization": 12.0,
        "few_shot": 50.0,
        "overall": 26.4,  # mean(20, 0, 50, 12, 50)
    }


@pytest.mark.parametrize("words, bucket", [(0, "0-4k"), (3999, "0-4k"), (4000, "4-8k"), (7999, "4-8k"), (8000, "8k+")])
def test_length_buckets(words, bucket):
    assert length_bucket(words) == bucket


def test_a_question_longer_than_its_share_stays_whole():
    context = "c" * 300
    kept = middle_truncate(TOK, context, question_len=80, max_length=100, ends=longbench_ends(100))
    assert len(TOK.encode(kept, add_bos=True)) + 80 == 100
    assert kept == "c" * 19  # BOS + 19 head tokens; no room left at the end of the context


def test_data_command_downloads_once_into_the_cache(tmp_path, monkeypatch):
    import zipfile

    from memexp.benchmarks import datasets as data
    from memexp.cli.data import download

    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    calls = []

    def fake_hub_file(repo_id, filename, dest):
        calls.append((repo_id, filename))
        with zipfile.ZipFile(dest, "w") as zf:
            for subset in LONGBENCH_TASKS + ("narrativeqa_e", "lsht"):
                zf.writestr(f"data/{subset}.jsonl", json.dumps(record(subset.removesuffix("_e"))) + "\n")
        return dest

    monkeypatch.setattr(data, "hub_file", fake_hub_file)
    cfg = LongBenchConfig(cache_dir=str(tmp_path / "cache"))
    path = download(cfg)
    assert calls == [("THUDM/LongBench", "data.zip")]
    assert sorted(p.name for p in path.glob("*.jsonl")) == sorted(f"{s}.jsonl" for s in LONGBENCH_TASKS)
    assert download(cfg) == path and len(calls) == 1  # cached: nothing fetched again
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert len(list(LongBench(cfg).examples(TOK))) == 12  # later runs read the cache offline


def test_a_failed_download_leaves_no_cache(tmp_path, monkeypatch):
    from memexp.benchmarks import datasets as data

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)

    def broken(dest):
        (dest / "partial.jsonl").write_text("{}")
        raise ConnectionError("network unreachable\nmore detail")

    with pytest.raises(BenchmarkDataError) as err:
        data.ensure_cached("longbench", str(tmp_path / "cache"), broken)
    assert "\n" not in str(err.value) and "ConnectionError: network unreachable" in str(err.value)
    assert not (tmp_path / "cache").exists() and list(tmp_path.iterdir()) == []


def test_runs_end_to_end(tmp_path):
    from helpers.memexp_process import memexp_run

    write_subsets(tmp_path, 2)
    summary = memexp_run(tmp_path, "bench=longbench", f"bench.data_path={tmp_path}", "bench.tasks=[trec,qasper]",
                         "bench.max_new_tokens=3", "bench.max_length=256")
    assert summary["complete"] and summary["num_questions"] == 4
    assert set(summary["by_task"]) == {"trec", "qasper"}
    assert {"aggregate/single_doc_qa", "aggregate/few_shot", "aggregate/overall"} <= set(summary)


def test_data_command_offline_says_what_to_do(tmp_path):
    from memexp.cli.data import download

    with pytest.raises(BenchmarkDataError, match="HF_HUB_OFFLINE / HF_DATASETS_OFFLINE is set"):
        download(LongBenchConfig(cache_dir=str(tmp_path / "cache")))
