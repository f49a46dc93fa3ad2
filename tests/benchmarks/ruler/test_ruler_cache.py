"""Generated data is a pure function of its inputs, and the disk cache returns it unchanged."""

from __future__ import annotations

import dataclasses
import json

import pytest

from memexp.benchmarks.ruler import benchmark as benchmark_module
from memexp.benchmarks.ruler.cache import tokenizer_fingerprint

TASKS = ["niah_single_1", "niah_multivalue", "vt", "cwe", "fwe"]


def dump(examples) -> list[dict]:
    return [dataclasses.asdict(e) for e in examples]


def test_same_seed_same_examples_in_fresh_caches(make_ruler, tokenizer, tmp_path):
    first = make_ruler(tasks=TASKS, lengths=[2600], num_samples=4, cache_dir=str(tmp_path / "a"))
    second = make_ruler(tasks=TASKS, lengths=[2600], num_samples=4, cache_dir=str(tmp_path / "b"))
    assert dump(first.examples(tokenizer)) == dump(second.examples(tokenizer))


def test_different_seed_different_examples(make_ruler, tokenizer):
    for task in TASKS:
        a = make_ruler(tasks=[task], lengths=[2600], num_samples=3, seed=42).task_examples(task, 2600, tokenizer)
        b = make_ruler(tasks=[task], lengths=[2600], num_samples=3, seed=7).task_examples(task, 2600, tokenizer)
        assert [e.context for e in a] != [e.context for e in b]
        assert len({e.context for e in a}) == 3  # the examples of one seed differ too


def test_cache_hit_returns_identical_examples_without_generating(make_ruler, tokenizer, tmp_path, monkeypatch):
    ruler = make_ruler(tasks=["niah_multiquery"], lengths=[3000], num_samples=5)
    generated = ruler.task_examples("niah_multiquery", 3000, tokenizer)
    files = list((tmp_path / "cache" / "niah_multiquery").iterdir())
    assert [f.name.startswith("3000-") and f.name.endswith(".json.gz") for f in files] == [True]

    def no_generation(*args, **kwargs):
        raise AssertionError("generated although cached")

    monkeypatch.setattr(benchmark_module, "generate_examples", no_generation)
    again = make_ruler(tasks=["niah_multiquery"], lengths=[3000], num_samples=5)
    assert dump(again.task_examples("niah_multiquery", 3000, tokenizer)) == dump(generated)
    fewer = make_ruler(tasks=["niah_multiquery"], lengths=[3000], num_samples=2)
    assert dump(fewer.task_examples("niah_multiquery", 3000, tokenizer)) == dump(generated[:2])


def test_more_samples_extend_the_cached_prefix(make_ruler, tokenizer):
    few = make_ruler(tasks=["niah_single_1"], lengths=[3000], num_samples=2).task_examples("niah_single_1", 3000, tokenizer)
    many = make_ruler(tasks=["niah_single_1"], lengths=[3000], num_samples=4).task_examples("niah_single_1", 3000, tokenizer)
    assert dump(many[:2]) == dump(few) and len(many) == 4


def test_cache_key_covers_tokenizer_essay_and_budget(make_ruler, tokenizer, tmp_path):
    class Shifted(type(tokenizer)):
        bos_id = 300

    def cache_files():
        return sorted(p.name for p in (tmp_path / "cache" / "niah_single_2").iterdir())

    make_ruler(tasks=["niah_single_2"], lengths=[2000], num_samples=1).task_examples("niah_single_2", 2000, tokenizer)
    make_ruler(tasks=["niah_single_2"], lengths=[2000], num_samples=1).task_examples("niah_single_2", 2000, Shifted())
    assert len(cache_files()) == 2
    other_essay = tmp_path / "other.txt"
    other_essay.write_text("A different essay. It has other sentences. " * 30)
    make_ruler(tasks=["niah_single_2"], lengths=[2000], num_samples=1, essay_path=str(other_essay)).task_examples(
        "niah_single_2", 2000, tokenizer
    )
    make_ruler(tasks=["niah_single_2"], lengths=[2000], num_samples=1, max_new_tokens=64).task_examples(
        "niah_single_2", 2000, tokenizer
    )
    assert len(cache_files()) == 4
    assert tokenizer_fingerprint(tokenizer) != tokenizer_fingerprint(Shifted())
    assert tokenizer_fingerprint(tokenizer) == tokenizer_fingerprint(type(tokenizer)())


def test_unreadable_cache_file_is_regenerated(make_ruler, tokenizer, tmp_path):
    examples = make_ruler(tasks=["fwe"], lengths=[3000], num_samples=2).task_examples("fwe", 3000, tokenizer)
    (path,) = (tmp_path / "cache" / "fwe").iterdir()
    path.write_bytes(b"not gzip")
    again = make_ruler(tasks=["fwe"], lengths=[3000], num_samples=2).task_examples("fwe", 3000, tokenizer)
    assert dump(again) == dump(examples)
    assert [p.name for p in (tmp_path / "cache" / "fwe").iterdir()] == [path.name]  # no temporary files left


def test_cache_file_records_its_inputs(make_ruler, tokenizer, tmp_path):
    import gzip

    make_ruler(tasks=["niah_single_2"], lengths=[2000], num_samples=1).task_examples("niah_single_2", 2000, tokenizer)
    (path,) = (tmp_path / "cache" / "niah_single_2").iterdir()
    inputs = json.loads(gzip.decompress(path.read_bytes()))["inputs"]
    assert inputs["task"] == "niah_single_2" and inputs["length"] == 2000 and inputs["seed"] == 42
    assert inputs["max_new_tokens"] == 128
    assert inputs["tokenizer"] == tokenizer_fingerprint(tokenizer)
    assert set(inputs["sources"]) == {"essays", "splitter", "wordlists"}


def test_examples_come_length_by_length_then_task(make_ruler, tokenizer):
    ruler = make_ruler(tasks=["niah_single_1", "fwe"], lengths=[2600, 3000], num_samples=2)
    assert [e.id for e in ruler.examples(tokenizer)] == [
        "niah_single_1/2600/0",
        "niah_single_1/2600/1",
        "fwe/2600/0",
        "fwe/2600/1",
        "niah_single_1/3000/0",
        "niah_single_1/3000/1",
        "fwe/3000/0",
        "fwe/3000/1",
    ]


@pytest.mark.parametrize("task", ["niah_single_2", "niah_multikey_1"])
def test_same_needles_at_every_length(make_ruler, tokenizer, task):
    ruler = make_ruler(tasks=[task], lengths=[3000, 6000], num_samples=2)
    short = ruler.task_examples(task, 3000, tokenizer)
    long = ruler.task_examples(task, 6000, tokenizer)
    for a, b in zip(short, long):
        assert a.meta["keys"] == b.meta["keys"] and a.meta["values"] == b.meta["values"]
        assert a.questions[0].references == b.questions[0].references
