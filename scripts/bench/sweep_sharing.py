"""Shared reads (issue 50): a sweep grouped against the same sweep run job by job, side by side.

    python scripts/bench/sweep_sharing.py                      # 16K and 64K, ~5 minutes on 2 idle cores
    python scripts/bench/sweep_sharing.py --lengths 16384 --samples 1

On tiny_gdn_random, RULER's niah_single_1, each grid is run twice by the same command line, one
process each, one after the other: `share_reads=false` (every job reads every context itself) and
the default (each context read once for the group). Grids: NoteBank's 3 x 3 B x R
(`method.span_budget=16,32,64 method.replay_budget=1,2,4`) and the five offline routers at R = 1.

Printed per grid and length: both wall times and their ratio; the ideal ratio from the solo runs'
own stage times (records' `seconds`: removing every read but one per example, everything else
kept, model loads included); and the grouped wall time over that ideal. Goal (issue 50): the grid
within 1.25x of the ideal and at least 4x faster than solo at 64K. The records of both runs are
compared too (they must be equal but for wall times); any difference exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRIDS = {
    "B x R (3 x 3)": ["method.span_budget=16,32,64", "method.replay_budget=1,2,4"],
    "routers at R=1 (5)": ["method.router=native,bm25,embedding,random,oracle", "method.replay_budget=1"],
}


def sweep(out: Path, length: int, samples: int, threads: int, grid: list[str], alone: bool) -> float:
    """Wall seconds of one sweep command, as a user runs it."""
    cmd = [sys.executable, "-m", "memexp", "run", "-m", "backbone=tiny_gdn_random", "method=notebank", "bench=ruler",
           "bench.tasks=[niah_single_1]", f"bench.lengths=[{length}]", f"bench.num_samples={samples}",
           "bench.max_new_tokens=16", "progress=false", f"threads={threads}", f"output_dir={out / 'runs'}",
           f"hydra.sweep.dir={out / 'sweep'}", *grid, *(["share_reads=false"] if alone else [])]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def records(out: Path) -> dict[str, list[dict]]:
    return {p.parent.name: [json.loads(line) for line in p.read_text().splitlines()]
            for p in (out / "runs").rglob("records.jsonl")}


def stages(runs: dict[str, list[dict]]) -> tuple[float, float, int]:
    """(seconds spent reading, seconds answering, jobs) over every record of every run."""
    read = sum(r["seconds"]["read"] for recs in runs.values() for r in recs)
    answer = sum(v for recs in runs.values() for r in recs for k, v in r["seconds"].items()
                 if not k.startswith("read") and isinstance(v, (int, float)))
    return read, answer, len(runs)


def without_wall_times(runs: dict[str, list[dict]]) -> dict[str, list[dict]]:
    return {k: [{f: v for f, v in r.items() if f != "seconds"} for r in recs] for k, recs in runs.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[16384, 65536])
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memexp-sharing-"))
    print(f"tiny_gdn_random, niah_single_1, {a.samples} examples, threads={a.threads}; each grid solo then grouped")
    header = f"{'grid':<20} {'length':>7} {'solo s':>8} {'grouped s':>10} {'speedup':>8} {'ideal':>7} {'grouped/ideal':>14}"
    print(header)
    print("-" * len(header))
    differ = 0
    for length in a.lengths:
        for name, grid in GRIDS.items():
            tag = f"{name.split()[0].lower()}_{length}"
            solo_out, group_out = work / f"{tag}_solo", work / f"{tag}_grouped"
            solo_s = sweep(solo_out, length, a.samples, a.threads, grid, alone=True)
            group_s = sweep(group_out, length, a.samples, a.threads, grid, alone=False)
            solo_runs, group_runs = records(solo_out), records(group_out)
            read, answer, jobs = stages(solo_runs)
            # the solo command with every repeated read taken out: one read per example, the rest kept
            ideal_s = solo_s - read * (1 - 1 / jobs)
            print(f"{name:<20} {length:>7} {solo_s:>8.1f} {group_s:>10.1f} {solo_s / group_s:>7.2f}x "
                  f"{solo_s / ideal_s:>6.2f}x {group_s / ideal_s:>13.2f}x", flush=True)
            if without_wall_times(solo_runs) != without_wall_times(group_runs):
                print(f"  records differ between solo and grouped ({tag})")
                differ += 1
    print(f"(work folder {work})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
