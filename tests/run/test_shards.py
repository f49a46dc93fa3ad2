"""`bench.shard=i/n`: disjoint deterministic shards (example index mod n), each in its own run
folder with its own summary; together exactly the unsharded run; `merge_shards` puts them back
together and refuses folders that are not shards of one configuration."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from memexp.core.compose import load_config
from memexp.core.registry import BENCHES
from memexp.core.schema import ConfigError
from memexp.run.runner import run
from memexp.run.shards import ShardMergeError, merge_shards

TINY = ["backbone=tiny_gdn_random", "method=plain", "logger=none", "progress=false", "bench=ruler",
        "bench.tasks=[niah_single_1]", "bench.lengths=[700]", "bench.num_samples=5", "bench.max_new_tokens=4"]


def folder_of(out):
    (summary,) = out.glob("*/*/*/*/summary.json")
    return summary.parent


def records(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The unsharded run and its two shards, each in its own output folder."""
    root = tmp_path_factory.mktemp("shards")
    cache = f"bench.cache_dir={root / 'cache'}"
    folders = {}
    for shard in (None, "0/2", "1/2"):
        out = root / (shard or "all").replace("/", "of")
        extra = [] if shard is None else [f"bench.shard={shard}"]
        run(load_config([*TINY, cache, f"output_dir={out}", *extra]))
        folders[shard] = folder_of(out)
    return folders


def test_shards_are_disjoint_and_together_the_unsharded_run(runs):
    whole = records(runs[None])
    ids = [r["example_id"] for r in whole]
    assert len(ids) == 5 and len(set(ids)) == 5
    first, second = records(runs["0/2"]), records(runs["1/2"])
    # example index mod n == i, over the benchmark's order
    assert [r["example_id"] for r in first] == ids[0::2]
    assert [r["example_id"] for r in second] == ids[1::2]
    same = ("example_id", "question_id", "prediction", "score", "references")
    by_key = {(r["example_id"], r["question_id"]): r for r in whole}
    for r in first + second:
        assert {k: r[k] for k in same} == {k: by_key[(r["example_id"], r["question_id"])][k] for k in same}
    assert len(first) + len(second) == len(whole)


def test_each_shard_has_its_own_folder_and_summary(runs):
    assert len({runs[None], runs["0/2"], runs["1/2"]}) == 3
    assert len({f.name for f in runs.values()}) == 3  # the shard is in the config hash
    for shard, n in (("0/2", 3), ("1/2", 2)):
        summary = json.loads((runs[shard] / "summary.json").read_text())
        assert summary["shard"] == shard and summary["shard_examples"] == n == summary["num_examples"]
        assert summary["complete"] is True and summary["num_questions"] == n
        assert yaml.safe_load((runs[shard] / "config.yaml").read_text())["bench"]["shard"] == shard
    whole = json.loads((runs[None] / "summary.json").read_text())
    assert "shard" not in whole and whole["num_examples"] == 5


def test_merged_shards_equal_the_unsharded_run(runs):
    merged, summary = merge_shards([runs["1/2"], runs["0/2"]])
    whole = records(runs[None])
    assert sorted((r["example_id"], r["score"]) for r in merged) == sorted((r["example_id"], r["score"]) for r in whole)
    expected = json.loads((runs[None] / "summary.json").read_text())
    for key in ("scores", "counts", "by_task", "by_length", "overall", "num_questions", "num_examples"):
        assert summary[key] == expected[key], key
    assert summary["shards"] == ["0/2", "1/2"] and summary["missing_shards"] == []
    assert summary["complete"] is True and summary["shard_examples"] == 5


def test_a_missing_shard_is_named_and_the_merge_incomplete(runs):
    merged, summary = merge_shards([runs["0/2"]])
    assert summary["missing_shards"] == ["1/2"] and summary["complete"] is False
    assert len(merged) == 3


def fake_shard(root, name, shard, keys, seed=42):
    """A run folder written by hand: config.yaml with `shard`, one record per (example, question)."""
    folder = root / name
    folder.mkdir()
    config = {"backbone": {"name": "b"}, "method": {"name": "plain"},
              "bench": {"name": "ruler", "seed": seed, "shard": shard}, "output_dir": str(root)}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    rows = [{"example_id": e, "question_id": q, "task": "t", "length": 1, "score": 100.0} for e, q in keys]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "summary.json").write_text(json.dumps({"complete": True, "num_examples": len(rows), "shard": shard}))
    return folder


def test_merge_refuses_folders_that_are_not_shards_of_one_configuration(tmp_path, runs):
    a = fake_shard(tmp_path, "a", "0/2", [("e0", "q")])
    b = fake_shard(tmp_path, "b", "1/2", [("e1", "q")], seed=7)
    with pytest.raises(ShardMergeError, match="different configurations"):
        merge_shards([a, b])
    c = fake_shard(tmp_path, "c", "0/2", [("e2", "q")])
    with pytest.raises(ShardMergeError, match=r"shard 0/2 appears twice: .*/a and .*/c"):
        merge_shards([a, c])
    d = fake_shard(tmp_path, "d", "1/3", [("e1", "q")])
    with pytest.raises(ShardMergeError, match=r"split the benchmark differently \(n = 2, 3\)"):
        merge_shards([a, d])
    e = fake_shard(tmp_path, "e", "1/2", [("e0", "q")])
    with pytest.raises(ShardMergeError, match=r"question \('e0', 'q'\) is recorded by two shards"):
        merge_shards([a, e])
    copy = shutil.copytree(runs["0/2"], tmp_path / "copy")
    with pytest.raises(ShardMergeError, match="appears twice"):
        merge_shards([runs["0/2"], copy])


def shard_error(value: str) -> str:
    return f"bench.shard='{value}': must be i/n with 0 <= i < n (e.g. 0/4), or null for all examples"


@pytest.mark.parametrize("name", [e.name for e in BENCHES])
def test_every_benchmark_has_a_validated_shard(name):
    with pytest.raises(ConfigError) as e:
        load_config(["backbone=tiny_gdn_random", f"bench={name}", "bench.shard=2/2"])
    assert str(e.value) == shard_error("2/2")
    assert load_config(["backbone=tiny_gdn_random", f"bench={name}", "bench.shard=1/2"]).bench.shard == "1/2"


@pytest.mark.parametrize("value", ["1", "-1/2", "a/b", "0/0", "1/2/3"])
def test_a_malformed_shard_is_one_line(value):
    with pytest.raises(ConfigError) as e:
        load_config(["backbone=tiny_gdn_random", "bench=ruler", f"bench.shard={value}"])
    assert str(e.value) == shard_error(value)
