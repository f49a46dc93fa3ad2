"""Start the same tiny run N times at once on one run folder: one must run, the others stop at once.

    OMP_NUM_THREADS=1 python scripts/check/concurrency_test.py --processes 2 --samples 6

Prints each process's exit code and one-line message, and the record count; exits 1 unless exactly one
process succeeded, every other exited 1 naming the holder, and records.jsonl holds no duplicate.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kill_test import ENV, args_for, folder


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--samples", type=int, default=6)
    a = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="memexp-concurrency-")) / "runs"
    t0 = time.perf_counter()
    procs = [subprocess.Popen(args_for(out, a.samples), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for _ in range(a.processes)]
    ended: dict[int, float] = {}
    while len(ended) < len(procs):
        for i, proc in enumerate(procs):
            if i not in ended and proc.poll() is not None:
                ended[i] = round(time.perf_counter() - t0, 1)
        time.sleep(0.05)
    results = []
    for i, proc in enumerate(procs):
        err = proc.stderr.read()
        lines = [line for line in err.splitlines() if line.startswith("memexp: ")]
        results.append((proc.returncode, ended[i], lines))
    recs = [json.loads(line) for line in (folder(out) / "records.jsonl").read_text().splitlines()]
    keys = [(r["example_id"], r["question_id"]) for r in recs]
    for code, seconds, lines in results:
        print(f"exit {code} after {seconds} s: {lines[0] if lines else '(no error line)'}")
    print(f"records: {len(recs)} (expected {a.samples}), duplicated {len(keys) - len(set(keys))}")
    codes = sorted(code for code, _, _ in results)
    ok = codes == [0] + [1] * (a.processes - 1) and len(recs) == a.samples == len(set(keys))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
