"""Outside text: local files as configured, one clear error when a source is missing
offline (the test session is offline), and nothing needed by the download-free tasks."""

from __future__ import annotations

import dataclasses
import json

import pytest
from ruler_fixtures import ESSAY, SQUAD

from memexp.benchmarks.ruler import sources
from memexp.benchmarks.ruler.qa import read_squad
from memexp.core.schema import ConfigError


def test_noise_needle_vt_fwe_need_no_source(make_ruler, tokenizer):
    tasks = ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt", "fwe"]
    ruler = make_ruler(tasks=tasks, lengths=[2600], num_samples=1, essay_path=None)
    assert [e.task for e in ruler.examples(tokenizer)] == tasks


def test_missing_essays_name_the_tasks_and_the_fix_before_any_example(make_ruler, tokenizer):
    tasks = ["niah_single_1", "niah_single_2", "niah_multivalue"]
    examples = make_ruler(tasks=tasks, lengths=[2600], num_samples=1, essay_path=None).examples(tokenizer)
    with pytest.raises(sources.MissingData) as e:
        next(examples)
    message = str(e.value)
    assert message.startswith("RULER task(s) niah_single_2, niah_multivalue need the Paul Graham essays: ")
    assert "bench.essay_path=/path/PaulGrahamEssays.json" in message and "baber/paul_graham_essays" in message
    assert "\n" not in message


def test_missing_qa_data_name_the_fix(make_ruler, tokenizer):
    with pytest.raises(sources.MissingData, match=r"^RULER task qa_1 needs SQuAD v2.0 dev: pass bench.squad_path="):
        next(make_ruler(tasks=["qa_1"]).examples(tokenizer))
    with pytest.raises(sources.MissingData, match=r"^RULER task qa_2 needs HotpotQA dev \(distractor\): pass bench.hotpotqa_path="):
        next(make_ruler(tasks=["qa_2"]).examples(tokenizer))


def test_configured_file_that_does_not_exist(make_ruler, tokenizer, tmp_path):
    missing = str(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match=r"^bench.essay_path='.*nope.json': no such file$"):
        make_ruler(tasks=["niah_single_2"], essay_path=missing)
    with pytest.raises(sources.MissingData, match=r"^bench.squad_path='.*nope.json': no such file$"):
        next(make_ruler(tasks=["qa_1"], squad_path=missing).examples(tokenizer))


def test_essay_txt_and_json_give_the_same_examples(make_ruler, tokenizer, tmp_path):
    txt = tmp_path / "essays.txt"
    txt.write_text(ESSAY)
    from_json = make_ruler(tasks=["niah_single_3"], lengths=[3000], num_samples=2).task_examples(
        "niah_single_3", 3000, tokenizer
    )
    from_txt = make_ruler(
        tasks=["niah_single_3"], lengths=[3000], num_samples=2, essay_path=str(txt), cache_dir=str(tmp_path / "other")
    ).task_examples("niah_single_3", 3000, tokenizer)
    assert [dataclasses.asdict(e) for e in from_txt] == [dataclasses.asdict(e) for e in from_json]


def test_squad_hub_rows_rebuild_the_dev_file_nesting():
    rows = [
        {"title": a["title"], "context": p["context"], "question": q["question"],
         "answers": {"text": [x["text"] for x in q["answers"]], "answer_start": [0] * len(q["answers"])}}
        for a in SQUAD["data"] for p in a["paragraphs"] for q in p["qas"]
    ]
    rebuilt = read_squad(sources._squad_from_rows(rows))
    original = read_squad(SQUAD)
    # paragraphs without questions never reach the hub rows, so they are no documents there
    assert rebuilt.docs == [d for d in original.docs if d not in ("K2 is harder to climb than Everest.", "The Alps span eight countries.")]
    assert [(i.query, i.outputs) for i in rebuilt.items] == [(i.query, i.outputs) for i in original.items]


def test_squad_reader_keeps_answerable_questions_and_same_article_distractors():
    data = read_squad(SQUAD)
    assert [i.query for i in data.items] == [
        "Where does the Nile flow?",
        "Which river carries the most water?",
        "What is the highest mountain?",
    ]
    everest = data.items[2]
    assert [data.docs[i] for i in everest.context] == ["Everest is the highest mountain above sea level."]
    assert sorted(data.docs[i] for i in everest.more_context) == [
        "K2 is harder to climb than Everest.",
        "The Alps span eight countries.",
    ]


def test_cwe_beyond_wonderwords_needs_a_word_list(make_ruler, tokenizer, tmp_path):
    length = 400_000  # about 40 byte tokens per distinct word: more than the 8166 words
    with pytest.raises(sources.MissingData, match=r"^RULER task cwe at 400000 tokens needs more than 8166 distinct words"):
        make_ruler(tasks=["cwe"], lengths=[length], num_samples=1).task_examples("cwe", length, tokenizer)
    words = tmp_path / "english_words.json"
    words.write_text(json.dumps({str(i): f"w{i:05d}x" for i in range(20000)}))
    ruler = make_ruler(tasks=["cwe"], lengths=[length], num_samples=1, cwe_words_path=str(words))
    (example,) = ruler.task_examples("cwe", length, tokenizer)
    assert example.meta["size"] > 8166 and example.meta["tokens"] <= length
    assert all(w.startswith("w") and w.endswith("x") for w in example.questions[0].references)


def test_hub_sources_when_online(monkeypatch, tmp_path):
    """The online branches, with the hub replaced by local stand-ins (tests/benchmarks/hub reads a real
    hub cache layout offline)."""
    rows = [
        {"title": a["title"], "context": p["context"], "question": q["question"],
         "answers": {"text": [x["text"] for x in q["answers"]], "answer_start": [0] * len(q["answers"])}}
        for a in SQUAD["data"] for p in a["paragraphs"] for q in p["qas"]
    ]
    calls = []

    def hub_rows(name, split):
        calls.append((name, split))
        return [{"text": "First essay."}, {"text": "Second essay."}] if name == sources.ESSAYS_HUB else rows

    monkeypatch.setattr(sources, "hub_rows", hub_rows)
    assert sources.load_essays(None, ["niah_single_2"]).value == "First essay. Second essay."
    assert read_squad(sources.load_squad(None).value).docs[0] == "Everest is the highest mountain above sea level."
    assert calls == [("baber/paul_graham_essays", "train"), ("rajpurkar/squad_v2", "validation")]

    hotpot_file = tmp_path / "downloaded.json"
    hotpot_file.write_text(json.dumps([{"question": "q", "answer": "a", "context": []}]))

    def hf_hub_download(repo_id, filename, repo_type, revision, local_files_only=False):
        assert (repo_id, filename, repo_type) == ("namlh2004/hotpotqa", "hotpot_dev_distractor_v1.json", "dataset")
        assert revision == "7e54db4656209750ff487f6fdf8e39a66dba136b"
        return str(hotpot_file)

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    assert sources.load_hotpotqa(None).value == [{"question": "q", "answer": "a", "context": []}]
