"""The offline essay stand-in: deterministic prose, chosen by bench.essay_standin, and named in
every record of the essay tasks it feeds (never in a record of a task it does not)."""

import json

import pytest
from helpers.memexp_process import memexp_ok

from memexp.benchmarks.ruler.config import RulerConfig
from memexp.benchmarks.ruler.sources import load_essays
from memexp.benchmarks.ruler.standin import STANDIN_SOURCE, standin_text, word_subset
from memexp.core.schema import ConfigError


def test_the_text_is_deterministic_per_seed_over_one_fixed_vocabulary():
    assert standin_text(0) == standin_text(0)
    assert standin_text(0) != standin_text(1)
    # another seed reorders the same words, so a tokenizer trained on training seeds covers seed 0
    vocabularies = [{w.strip(".,") for w in standin_text(seed).split()} for seed in (0, 1)]
    assert vocabularies[0] == vocabularies[1]
    assert set(word_subset()[1]) <= vocabularies[0]
    assert len(standin_text(0).split()) >= 40_000


def test_the_bench_field_picks_it_and_refuses_a_second_essay_source(tmp_path):
    loaded = load_essays(None, ["niah_single_2"], standin=True)
    assert loaded.value == standin_text(0)
    essay = tmp_path / "essay.txt"
    essay.write_text("An essay.")
    with pytest.raises(ConfigError, match="bench.essay_standin"):
        RulerConfig(essay_standin=True, essay_path=str(essay))


def test_every_record_of_an_essay_task_names_the_stand_in(tmp_path):
    argv = ["run", "backbone=tiny_gdn_random", "method=plain",
            "bench.tasks=[niah_single_1,niah_single_2]", "bench.lengths=[1024]", "bench.max_new_tokens=4", "bench.num_samples=2", "bench.essay_standin=true",
            f"output_dir={tmp_path / 'runs'}", f"bench.cache_dir={tmp_path / 'cache'}", "progress=false"]
    memexp_ok(*argv, cwd=tmp_path)
    (records,) = (tmp_path / "runs").rglob("records.jsonl")
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert sorted(r["task"] for r in rows) == ["niah_single_1"] * 2 + ["niah_single_2"] * 2
    for row in rows:
        assert row.get("source") == (STANDIN_SOURCE if row["task"] == "niah_single_2" else None)
