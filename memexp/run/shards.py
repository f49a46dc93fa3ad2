"""Example-level sharding: one large benchmark split across many GPUs or cluster jobs.

`bench.shard="i/n"` runs the examples whose index in the benchmark's fixed order is i mod n,
so the n shards are disjoint, deterministic and together the whole benchmark. The shard is
part of the config, hence of the run-folder hash: each shard has its own run folder, resumes on
its own, and its summary.json says `"shard": "i/n"`, `"shard_examples"` (how many examples
the shard holds) and `complete` for that shard alone.

`merge_shards(folders)` puts the shards of one configuration back together for `report`.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml
from omegaconf import OmegaConf

from memexp.core.registry import BENCHES
from memexp.core.schema import ConfigError, _build, _pick, parse_shard
from memexp.core.types import Record, record_key
from memexp.run.records import config_hash, summarize


class ShardMergeError(ValueError):
    """The folders are not shards of one configuration; the message is one line saying why."""


def select(examples: Iterable, total: int, shard: str | None) -> tuple[Iterator, int]:
    """The shard's examples (indices i, i+n, ... of the benchmark's order) and how many there are."""
    parsed = parse_shard(shard)
    if parsed is None:
        return iter(examples), total
    i, n = parsed
    return itertools.islice(examples, i, None, n), len(range(i, total, n))


def summary_fields(shard: str | None, shard_examples: int) -> dict[str, Any]:
    """What a shard's summary.json adds: nothing for an unsharded run."""
    return {} if shard is None else {"shard": shard, "shard_examples": shard_examples}


def _unsharded_identity(config: dict) -> str:
    """The configuration a shard belongs to: its config with bench.shard cleared, hashed as the
    run folder is (fields that do not change results left out)."""
    bench = {**(config.get("bench") or {}), "shard": None}
    return config_hash({**config, "bench": bench})


def _read(folder: Path) -> tuple[dict, dict, list[dict]]:
    folder = Path(folder)
    config_path, summary_path = folder / "config.yaml", folder / "summary.json"
    if not config_path.is_file():
        raise ShardMergeError(f"{folder}: no config.yaml (not a run folder)")
    config = yaml.safe_load(config_path.read_text()) or {}
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    # read-only: RunFolder.load_records would cut a partial last line off the file
    records = []
    if (folder / "records.jsonl").is_file():
        for line in (folder / "records.jsonl").read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return config, summary, records


def merge_shards(folders: Iterable[Path]) -> tuple[list[dict], dict]:
    """The records (JSON objects, shard by shard) and one summary of the shards in `folders`.

    Refuses (ShardMergeError) folders of different configurations (anything but bench.shard,
    including the shard count n), the same shard twice, or a question recorded by two shards.
    Missing shards are named in the summary's `missing_shards`; `complete` is true only when
    all n shards are there and each is complete. The summary is `summarize` over all records
    plus `shards`, `missing_shards`, `num_examples` (summed), `shard_examples` (summed) and the
    benchmark's `aggregate/*` rows recomputed from the merged records (QuALITY's `hard` and
    LongBench v2's difficulty columns need example metadata records do not carry, so they
    are absent).
    """
    folders = [Path(f) for f in folders]
    if not folders:
        raise ShardMergeError("no run folders to merge")
    read = [(f, *_read(f)) for f in folders]
    identity = _unsharded_identity(read[0][1])
    by_shard: dict[tuple[int, int], Path] = {}
    for folder, config, _, _ in read:
        if _unsharded_identity(config) != identity:
            raise ShardMergeError(f"{folder} and {folders[0]} are runs of different configurations "
                                  f"(they differ in more than bench.shard)")
        shard = parse_shard((config.get("bench") or {}).get("shard")) or (0, 1)
        if shard in by_shard:
            raise ShardMergeError(f"shard {shard[0]}/{shard[1]} appears twice: {by_shard[shard]} and {folder}")
        by_shard[shard] = folder
    counts = {n for _, n in by_shard}
    if len(counts) > 1:
        raise ShardMergeError(f"shards split the benchmark differently (n = {', '.join(map(str, sorted(counts)))})")
    (n,) = counts
    records, owner = [], {}
    for folder, _, _, recs in sorted(read, key=lambda r: _index_of(r[1])):
        for rec in recs:
            key = record_key(rec)
            if key in owner and owner[key] != folder:
                raise ShardMergeError(f"question {key} is recorded by two shards: {owner[key]} and {folder}")
            if key not in owner:
                owner[key] = folder
                records.append(rec)
    missing = [f"{i}/{n}" for i in range(n) if (i, n) not in by_shard]
    summaries = [s for _, _, s, _ in read]
    summary = summarize(records)
    summary["num_examples"] = sum(s.get("num_examples", 0) for s in summaries)
    summary["shard_examples"] = sum(s.get("shard_examples", s.get("num_examples", 0)) for s in summaries)
    summary["complete"] = not missing and all(s.get("complete", False) for s in summaries)
    summary["shards"] = [f"{i}/{n}" for i, _ in sorted(by_shard)]
    summary["missing_shards"] = missing
    summary.update(_aggregate(read[0][1], records))
    return records, summary


def _index_of(config: dict) -> int:
    return (parse_shard((config.get("bench") or {}).get("shard")) or (0, 1))[0]


def _aggregate(config: dict, records: list[dict]) -> dict[str, float]:
    """The benchmark's own extra summary rows over the merged records; none when the stored
    bench config does not validate here (an outside benchmark not imported, a local data path
    of another machine)."""
    from memexp.benchmarks import build_benchmark

    node = OmegaConf.create(config.get("bench") or {})
    try:
        bench = build_benchmark(_build(_pick(BENCHES, node), node, "bench"))
    except ConfigError:
        return {}
    return {f"aggregate/{k}": v for k, v in bench.aggregate([Record.from_json(r) for r in records]).items()}
