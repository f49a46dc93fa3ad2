"""Wall time of one memexp run under each torch thread setting, on an idle machine and with one
busy neighbour (a process that keeps one core at 100 %), measured side by side in one call.

Each setting runs the same command in a fresh output folder (nothing resumes), so the figures
differ only in the threads and the OpenMP wait policy. The environment of each run is set
before its Python starts, which is when torch's OpenMP pool reads OMP_WAIT_POLICY.

    python scripts/bench/threads.py                      # a 16K NoteBank run, 20 examples
    python scripts/bench/threads.py --quick-start        # the README's quick start, default setting only
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

# (label, threads override or None, OMP_WAIT_POLICY or None for libgomp's own default)
SETTINGS = (
    ("torch default threads, active wait", None, "ACTIVE"),
    ("threads=1, active wait", 1, "ACTIVE"),
    ("torch default threads, passive wait", None, "PASSIVE"),
    ("threads=1, passive wait", 1, "PASSIVE"),
)


def _spin() -> None:
    while True:
        pass


def _run(args: list[str], threads: int | None, policy: str | None) -> float:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled")
    env.pop("OMP_WAIT_POLICY", None)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "memexp", "run", *args, f"output_dir={out}", "progress=false",
               "logger=none"]
        if threads:
            cmd.append(f"threads={threads}")
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick-start", action="store_true",
                    help="time `python -m memexp run` itself with memexp's default setting only")
    ap.add_argument("overrides", nargs="*", help="run overrides (default: one 16K length, 20 examples)")
    a = ap.parse_args()
    if a.quick_start:
        args, settings = a.overrides, (("memexp's default", None, os.environ.get("OMP_WAIT_POLICY")),)
    else:
        args = a.overrides or ["bench.lengths=[16384]", "bench.num_samples=20"]
        settings = SETTINGS
    print(f"command: python -m memexp run {' '.join(args)}  ({os.cpu_count()} cores)")
    print("| setting | idle s | one busy neighbour s | busy / idle |")
    print("|---|---:|---:|---:|")
    for label, threads, policy in settings:
        idle = _run(args, threads, policy)
        hog = multiprocessing.Process(target=_spin, daemon=True)
        hog.start()
        try:
            busy = _run(args, threads, policy)
        finally:
            hog.terminate()
            hog.join()
        print(f"| {label} | {idle:.1f} | {busy:.1f} | {busy / idle:.2f} |", flush=True)


if __name__ == "__main__":
    main()
