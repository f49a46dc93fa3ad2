"""Every measured figure of docs/benchmarks.md, one benchmark after another (never two at once).

    python scripts/bench/all.py            # all, ~15-25 minutes on 2 idle cores
    python scripts/bench/all.py routing    # the ones whose name contains 'routing'

Each benchmark prints its own table of ratios measured side by side in one process.
"""

import subprocess
import sys
import time

PY = sys.executable
BENCHMARKS = [
    ("prefill (issue 2)", [PY, "scripts/bench/prefill.py", "--threads", "2"]),
    ("notebank vs plain + routing (issue 4)", [PY, "scripts/bench/notebank.py"]),
    ("routing reference vs fast path vs kernel (issue 5)", [PY, "scripts/bench/routing.py"]),
    ("latency App. C.5 (issue 5)", [PY, "scripts/bench/latency.py", "inputs=synthetic", "threads=2"]),
    ("read-once vs re-read (issue 7)", [PY, "scripts/bench/read_once.py", "--repeats", "2"]),
    ("backbones vs transformers (issue 8)", [PY, "scripts/bench/backbones.py", "--threads", "2"]),
    ("threads idle vs one busy neighbour (issue 19)", [PY, "scripts/bench/threads.py"]),
    ("induction init vs torch init, copying (issue 16)", [PY, "scripts/bench/induction_init.py", "--steps", "200"]),
    ("shared reads: grouped sweep vs solo (issue 50)", [PY, "scripts/bench/sweep_sharing.py"]),
]


def main(selected: list[str]) -> int:
    failed = 0
    for title, cmd in BENCHMARKS:
        if selected and not any(s in title for s in selected):
            continue
        print(f"\n=== {title}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        print(f"=== exit {rc}, {time.perf_counter() - t0:.0f} s", flush=True)
        failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
