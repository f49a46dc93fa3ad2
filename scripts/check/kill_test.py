"""SIGKILL a tiny run at random moments, resume it each time, and compare with an uninterrupted run.

    OMP_NUM_THREADS=1 python scripts/check/kill_test.py --kills 20 --samples 40 --seed 0
    OMP_NUM_THREADS=1 python scripts/check/kill_test.py --kills 20 --samples 10 --seed 0 --grouped

Each round starts `python -m memexp run` on the tiny random GDN, waits until 0, 1 or 2 more records
are on disk (drawn at random), then a random delay of up to one record's time (the mean time per
record of the uninterrupted run), and kills its process group with SIGKILL: kills land during start-up,
model load, generation and the record write alike, and every round leaves work for the next; once the kills are spent the run is resumed to the end. Records (without
wall-clock fields) and summary.json must equal those of one uninterrupted run; the script prints the
figures and exits 1 on any difference.

`--grouped`: the same on a sweep whose four jobs share their reads (NoteBank, B x R = 2 x 2: one
group, one process; memexp.run.groups); the reference is the same sweep with `share_reads=false`,
and each job's records and summary must equal its reference's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled",
       "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


GROUP = ["-m", "method=notebank", "method.chunk_size=128", "method.replay_budget=1,2", "method.span_budget=16,32",
         "hydra.sweep.dir={out}/sweep"]
JOBS = 4  # the group's jobs


def args_for(out: Path, samples: int, grouped: bool = False, alone: bool = False) -> list[str]:
    sweep = [a.format(out=out) for a in GROUP] + (["share_reads=false"] if alone else []) if grouped else ["method=plain"]
    return [sys.executable, "-m", "memexp", "run", "backbone=tiny_gdn_random", "bench=ruler",
            "bench.tasks=[niah_single_1]", "bench.lengths=[512]", "bench.max_new_tokens=4",
            f"bench.num_samples={samples}", "progress=false", f"output_dir={out}/runs", *sweep]


def folders(out: Path) -> dict[str, Path]:
    return {p.parent.name: p.parent for p in (out / "runs").rglob("config.yaml")}


def count(out: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in (out / "runs").rglob("records.jsonl"))


def stable_records(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (path / "records.jsonl").read_text().splitlines()]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--samples", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--grouped", action="store_true", help="a sweep of 4 jobs sharing their reads")
    a = p.parse_args()
    total = a.samples * (JOBS if a.grouped else 1)
    rng = random.Random(a.seed)
    work = Path(tempfile.mkdtemp(prefix="memexp-kill-"))
    t0 = time.perf_counter()
    subprocess.run(args_for(work / "whole", a.samples, a.grouped, alone=True), env=ENV, check=True, capture_output=True)
    whole_seconds = time.perf_counter() - t0
    timed = [json.loads(line)["seconds"] for f in folders(work / "whole").values()
             for line in (f / "records.jsonl").read_text().splitlines()]
    per_record = sum(sum(v for k, v in t.items() if "/" not in k) for t in timed) / len(timed)
    killed, progress = work / "killed", []
    for _ in range(a.kills):
        proc = subprocess.Popen(args_for(killed, a.samples, a.grouped), env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        target = min(count(killed) + rng.randint(0, 2), total - 1)
        while proc.poll() is None and count(killed) < target:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, per_record))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        progress.append(count(killed))
    subprocess.run(args_for(killed, a.samples, a.grouped), env=ENV, check=True, capture_output=True)
    whole, resumed = folders(work / "whole"), folders(killed)
    print(f"uninterrupted: {whole_seconds:.1f} s ({per_record:.3f} s per record); kills: {a.kills}; records on disk "
          f"after each kill: {progress}")
    ok = sorted(whole) == sorted(resumed) and len(whole) == (JOBS if a.grouped else 1)
    for name in sorted(whole):
        rw, rk = stable_records(whole[name]), stable_records(resumed[name]) if name in resumed else []
        keys = [(r["example_id"], r["question_id"]) for r in rk]
        same_summary = name in resumed and json.loads((whole[name] / "summary.json").read_text()) == \
            json.loads((resumed[name] / "summary.json").read_text())
        lost = len({(r["example_id"], r["question_id"]) for r in rw} - set(keys))
        print(f"{name}: records uninterrupted {len(rw)}, resumed {len(rk)}; lost {lost}; duplicated "
              f"{len(keys) - len(set(keys))}; identical records: {rw == rk}; identical summary: {same_summary}")
        ok = ok and rw == rk and same_summary
    print(f"same folder names: {sorted(whole) == sorted(resumed)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
