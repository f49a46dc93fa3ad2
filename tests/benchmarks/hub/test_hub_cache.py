"""Offline means "cache only": every benchmark that reads hub data finds it in a Hugging Face hub
cache (laid out as huggingface_hub keeps it, in a temporary folder) with HF_HUB_OFFLINE=1,
reads the right split's files, and names the missing file or hub id and the override when the
cache lacks it."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from fake_hub import add_dataset, card, jsonl

import memexp.benchmarks.memoryagentbench.benchmark as mab
from memexp.backbones.tokenizer import ByteTokenizer
from memexp.benchmarks.datasets import BenchmarkDataError
from memexp.benchmarks.hub import files_of_split
from memexp.benchmarks.longbench.benchmark import LongBench
from memexp.benchmarks.longbench.config import LongBenchConfig
from memexp.benchmarks.longbench_v2.benchmark import LongBenchV2
from memexp.benchmarks.longbench_v2.config import LongBenchV2Config
from memexp.benchmarks.longhealth.benchmark import LongHealth
from memexp.benchmarks.longhealth.config import LongHealthConfig
from memexp.benchmarks.memoryagentbench.benchmark import MemoryAgentBench
from memexp.benchmarks.memoryagentbench.config import MemoryAgentBenchConfig
from memexp.benchmarks.quality.benchmark import Quality
from memexp.benchmarks.quality.config import QualityConfig
from memexp.benchmarks.ruler import sources
from memexp.benchmarks.ruler.benchmark import Ruler
from memexp.benchmarks.ruler.benchmark import download as ruler_download
from memexp.benchmarks.ruler.config import RulerConfig

TOK = ByteTokenizer()
ESSAYS = [{"text": "Most good ideas look bad at first."}, {"text": "That is why they are still available."}]
# hub rows of rajpurkar/squad_v2 (one per question, in file order); the train split is a decoy
SQUAD_ROWS = [
    {"id": "a1", "title": "Rivers", "context": "The Nile flows north.", "question": "Where does the Nile flow?",
     "answers": {"text": ["north"], "answer_start": [15]}},
    {"id": "a2", "title": "Rivers", "context": "The Nile flows north.", "question": "Who owns the Nile?",
     "answers": {"text": [], "answer_start": []}},
    {"id": "b1", "title": "Mountains", "context": "Everest is the highest mountain.",
     "question": "What is the highest mountain?", "answers": {"text": ["Everest"], "answer_start": [0]}},
]
SQUAD_TRAIN = [{"id": "t", "title": "Decoy", "context": "Train split text.", "question": "Train?",
                "answers": {"text": ["train"], "answer_start": [0]}}]
SQUAD_CARD = card([{"config_name": "squad_v2", "data_files": [
    {"split": "train", "path": "squad_v2/train-*"}, {"split": "validation", "path": "squad_v2/validation-*"}]}])
HOTPOT = [{"_id": "h0", "question": "Which city hosts the tower?", "answer": "Paris",
           "context": [[f"Page {p}", [f"Fact {p} one. ", f"Fact {p} two."]] for p in range(10)],
           "supporting_facts": [["Page 0", 0]], "type": "bridge", "level": "easy"}]


def add_ruler_sources(cache, squad_files=None):
    add_dataset(cache, sources.ESSAYS_HUB, {"data/train-00000-of-00001.jsonl": jsonl(ESSAYS)})
    add_dataset(cache, sources.SQUAD_HUB, squad_files or {
        "README.md": SQUAD_CARD,
        "squad_v2/train-00000-of-00001.jsonl": jsonl(SQUAD_TRAIN),
        "squad_v2/validation-00000-of-00001.jsonl": jsonl(SQUAD_ROWS)})
    # pinned revision: a snapshot at that commit, no branch ref
    add_dataset(cache, sources.HOTPOTQA_HUB, {sources.HOTPOTQA_FILE: json.dumps(HOTPOT)},
                commit=sources.HOTPOTQA_REVISION, branch=None)


def test_ruler_sources_come_from_the_hub_cache_offline(hf_cache):
    add_ruler_sources(hf_cache)
    assert sources.load_essays(None, ["niah_single_2"]).value == (
        "Most good ideas look bad at first. That is why they are still available.")
    # dev-v2.0.json's nesting, written out by hand from the three rows (no train-split article)
    assert sources.load_squad(None).value == {"data": [
        {"title": "Rivers", "paragraphs": [{"context": "The Nile flows north.", "qas": [
            {"question": "Where does the Nile flow?", "answers": [{"text": "north"}], "is_impossible": False},
            {"question": "Who owns the Nile?", "answers": [], "is_impossible": True}]}]},
        {"title": "Mountains", "paragraphs": [{"context": "Everest is the highest mountain.", "qas": [
            {"question": "What is the highest mountain?", "answers": [{"text": "Everest"}], "is_impossible": False}]}]},
    ]}
    assert sources.load_hotpotqa(None).value == HOTPOT


def test_a_ruler_run_generates_qa_and_essay_tasks_from_the_cache(hf_cache, tmp_path):
    add_ruler_sources(hf_cache)
    ruler = Ruler(RulerConfig(tasks=["niah_single_2", "qa_1", "qa_2"], lengths=[1500], num_samples=1,
                              cache_dir=str(tmp_path / "ruler")))
    examples = {e.task: e for e in ruler.examples(TOK)}
    assert set(examples) == {"niah_single_2", "qa_1", "qa_2"}
    assert "Most good ideas look bad at first." in examples["niah_single_2"].context
    assert examples["qa_1"].questions[0].references in (["north"], ["Everest"])
    assert "Train split text." not in examples["qa_1"].context
    assert "Fact 0 one." in examples["qa_2"].context and examples["qa_2"].questions[0].references == ["Paris"]


def test_the_split_files_follow_the_naming_convention_without_a_card(hf_cache):
    snapshot = add_dataset(hf_cache, "org/splits", {
        "data/validation-00000-of-00002.jsonl": "", "data/validation-00001-of-00002.jsonl": "",
        "data/validation_matched-00000-of-00001.jsonl": "", "test.jsonl": "", "validation/0000.parquet": "",
        "validation.txt": ""})
    assert [p.relative_to(snapshot).as_posix() for p in files_of_split(snapshot, "validation")] == [
        "data/validation-00000-of-00002.jsonl", "data/validation-00001-of-00002.jsonl", "validation/0000.parquet"]


def test_parquet_split_files_are_read(hf_cache):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(SQUAD_ROWS), buffer)
    add_ruler_sources(hf_cache, {"squad_v2/validation-00000-of-00001.parquet": buffer.getvalue()})
    data = sources.load_squad(None).value
    assert [q["answers"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]] == [
        [{"text": "north"}], [], [{"text": "Everest"}]]


def test_memexp_data_bench_ruler_prefetches_every_source(hf_cache, capsys):
    add_ruler_sources(hf_cache)
    assert ruler_download(RulerConfig()) == hf_cache
    err = capsys.readouterr().err
    for name, repo in (("essays", "paul_graham_essays"), ("squad", "squad_v2"), ("hotpotqa", "hotpotqa")):
        assert f"[memexp] ruler {name}: {hf_cache}/datasets--" in err and repo in err


def test_memexp_data_bench_ruler_names_each_missing_source_and_its_override(hf_cache, tmp_path):
    essays = tmp_path / "essays.txt"
    essays.write_text("Local essays.")
    with pytest.raises(sources.MissingData) as e:
        ruler_download(RulerConfig(essay_path=str(essays)))
    message = str(e.value)
    assert "\n" not in message and "essays" not in message  # given locally: nothing to fetch
    assert "squad: rajpurkar/squad_v2 (split validation) or bench.squad_path=/path/dev-v2.0.json" in message
    assert ("hotpotqa: namlh2004/hotpotqa/hotpot_dev_distractor_v1.json or "
            "bench.hotpotqa_path=/path/hotpot_dev_distractor_v1.json") in message


def test_a_missing_ruler_source_names_the_hub_id_and_the_override(hf_cache):
    with pytest.raises(sources.MissingData) as e:
        sources.load_squad(None)
    message = str(e.value)
    assert message.startswith("RULER task qa_1 needs SQuAD v2.0 dev: pass bench.squad_path=/path/dev-v2.0.json, ")
    assert f"hub dataset rajpurkar/squad_v2 (split validation) is not in the Hugging Face cache ({hf_cache})" in message
    assert "\n" not in message


def longbench_zip(subsets: list[str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for subset in subsets:
            rows = [{"_id": f"{subset}0", "input": "Which?", "context": "Passage one.", "answers": ["one"],
                     "length": 1200, "dataset": subset, "all_classes": ["one", "two"]}]
            zf.writestr(f"data/{subset}.jsonl", jsonl(rows))
    return buffer.getvalue()


def test_longbench_fills_its_cache_from_the_hub_cache_offline(hf_cache, tmp_path):
    add_dataset(hf_cache, "THUDM/LongBench", {"data.zip": longbench_zip(list(LongBenchConfig().tasks))})
    cfg = LongBenchConfig(tasks=["trec", "qasper"], cache_dir=str(tmp_path / "longbench"))
    assert [e.id for e in LongBench(cfg).examples(TOK)] == ["trec/trec0", "qasper/qasper0"]
    assert (tmp_path / "longbench" / "qasper.jsonl").is_file()


def test_longbench_v2_and_memoryagentbench_from_the_hub_cache_offline(hf_cache, tmp_path, monkeypatch):
    record = {"_id": "v0", "domain": "Single-Document QA", "sub_domain": "Legal", "difficulty": "easy",
              "length": "short", "question": "Which?", "choice_A": "a", "choice_B": "b", "choice_C": "c",
              "choice_D": "d", "answer": "B", "context": "The document."}
    add_dataset(hf_cache, "THUDM/LongBench-v2", {"data.json": json.dumps([record])})
    v2 = LongBenchV2(LongBenchV2Config(cache_dir=str(tmp_path / "v2")))
    assert [e.id for e in v2.examples(TOK)] == ["v0"]

    context = " ".join(f"Fact {i} is that item {i} has value {i * 7}." for i in range(80))
    splits = {}
    for source, task in mab.TASKS.items():
        row = {"context": context, "questions": ["Who?"], "answers": [["Ann"]], "metadata": {"source": source}}
        splits.setdefault(task.split, []).append(row)
    add_dataset(hf_cache, "ai-hyz/MemoryAgentBench",
                {f"data/{split}-00000-of-00001.jsonl": jsonl(rows) for split, rows in splits.items()})
    monkeypatch.setattr(mab, "official_tools", lambda: (lambda text: text.split(". "), lambda s: len(s.split())))
    cfg = MemoryAgentBenchConfig(tasks=["eventqa_full"], cache_dir=str(tmp_path / "mab"), chunk_size=100)
    (example,) = MemoryAgentBench(cfg).examples(TOK)
    assert "Fact 79 is that item 79" in example.context


@pytest.mark.parametrize("make, hub, override", [
    (lambda c: LongBench(LongBenchConfig(cache_dir=c)), "hub dataset THUDM/LongBench (file data.zip)",
     "bench.data_path=/path/longbench (a folder of <subset>.jsonl"),
    (lambda c: LongBenchV2(LongBenchV2Config(cache_dir=c)), "hub dataset THUDM/LongBench-v2 (file data.json)",
     "bench.data_path=/path/data.json"),
    (lambda c: MemoryAgentBench(MemoryAgentBenchConfig(cache_dir=c)),
     "hub dataset ai-hyz/MemoryAgentBench at revision main (split", "bench.data_path=/path/memoryagentbench"),
    (lambda c: Quality(QualityConfig(cache_dir=c)), "nyu-mll/quality/main/data/v1.0.1/QuALITY.v1.0.1.htmlstripped",
     "bench.data_path=/path/QuALITY.v1.0.1.htmlstripped.dev"),
    (lambda c: LongHealth(LongHealthConfig(cache_dir=c)), "kbressem/LongHealth/main/data/benchmark_v5.json",
     "bench.data_path=/path/benchmark_v5.json"),
], ids=["longbench", "longbench_v2", "memoryagentbench", "quality", "longhealth"])
def test_missing_data_names_the_file_or_hub_id_and_the_override(hf_cache, tmp_path, monkeypatch, make, hub, override):
    # memoryagentbench's official chunker (nltk + tiktoken) comes before the hub rows; not under test here
    monkeypatch.setattr(mab, "official_tools", lambda: (lambda text: text.split(". "), lambda s: len(s.split())))
    with pytest.raises(BenchmarkDataError) as e:
        next(make(str(tmp_path / "cache")).examples(TOK))
    message = str(e.value)
    assert "\n" not in message and "HF_HUB_OFFLINE" in message
    assert hub in message and override in message and str(tmp_path / "cache") in message
    assert not (tmp_path / "cache").exists()
