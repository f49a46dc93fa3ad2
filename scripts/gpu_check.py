"""Every CUDA path checked in one command on a GPU machine (`make gpu-check`), within 10 minutes.

    python scripts/gpu_check.py                       # report in outputs/gpu_check/<date>_<time>.md
    python scripts/gpu_check.py --budget 300 --skip-install --out /tmp/gpu

Steps, one after another, each under its own time limit cut from one total budget:
  1. `pip install --no-build-isolation -e ".[cuda]"` (FLA, triton, mamba-ssm, causal-conv1d)
  2. `make test-gpu` (the CUDA tests: kernels against their references)
  3. `make bench`, benchmark by benchmark (scripts/bench_all.py's list, each run through
     bench_all.py with its title), so one slow benchmark cannot take the others' figures
A step that passes its limit is killed (its whole process group) and recorded as timed out
with what it printed so far; the report is rewritten after every step, so it holds every
figure, the test summary and the GPU's name even when the run is cut short. On a machine
where torch sees no CUDA device it prints one line and exits 2, writing nothing.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEEP_LINES = 300  # of each step's output in the report (a failed pip build prints thousands)
STEP_CAPS = {"install": 180, "test-gpu": 180}  # seconds at most; benchmarks share what is left


@dataclass
class Step:
    name: str
    cmd: list[str]
    cap: float | None = None  # its own limit; None = an equal share of the remaining budget
    status: str = "not run"
    seconds: float = 0.0
    output: str = ""
    notes: list[str] = field(default_factory=list)


def cuda_device() -> str | None:
    """The first CUDA device's name as torch sees it, or None."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def bench_titles() -> list[str]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_all import BENCHMARKS

    return [title for title, _ in BENCHMARKS]


def plan(skip_install: bool) -> list[Step]:
    py = sys.executable
    steps = [] if skip_install else [
        Step("install", [py, "-m", "pip", "install", "--no-build-isolation", "-e", ".[cuda]"], STEP_CAPS["install"])]
    steps.append(Step("test-gpu", ["make", "test-gpu", f"PYTHON={py}"], STEP_CAPS["test-gpu"]))
    steps += [Step(f"bench: {t}", [py, "scripts/bench_all.py", t]) for t in bench_titles()]
    return steps


def run_step(step: Step, limit: float) -> None:
    """Run `step` in its own process group under `limit` seconds; fill status, time and output."""
    with tempfile.TemporaryFile(mode="w+") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(step.cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            rc = proc.wait(timeout=max(limit, 1))
            step.status = "ok" if rc == 0 else f"exit {rc}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            step.status = f"TIMED OUT after {limit:.0f} s"
        step.seconds = time.perf_counter() - t0
        log.seek(0)
        lines = log.read().splitlines()
    if len(lines) > KEEP_LINES:
        step.notes.append(f"first {len(lines) - KEEP_LINES} of {len(lines)} output lines left out")
        lines = lines[-KEEP_LINES:]
    step.output = "\n".join(lines)


def test_summary(step: Step) -> str:
    """pytest's final counts line ('3 passed, 1 skipped in 12.3s'), or the step's status."""
    counts = [ln for ln in step.output.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", ln)]
    return counts[-1].strip("= ") if counts else step.status


def header(gpu: str) -> list[str]:
    import torch

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=20, check=False).stdout.strip() \
        if _has("nvidia-smi") else "nvidia-smi not found"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"
    return [f"# GPU check {datetime.datetime.now():%Y-%m-%d %H:%M}", "",
            f"- GPU: {gpu} ({smi})", f"- torch {torch.__version__}, CUDA {torch.version.cuda}, Python "
            f"{sys.version.split()[0]}", f"- memexp commit {commit}", f"- command: `make gpu-check` "
            f"(`{' '.join(sys.argv)}`)", ""]


def _has(program: str) -> bool:
    return any((Path(d) / program).is_file() for d in os.environ.get("PATH", "").split(os.pathsep))


def report(head: list[str], steps: list[Step]) -> str:
    lines = head + ["| step | status | seconds |", "|---|---|---:|"]
    lines += [f"| {s.name} | {s.status} | {s.seconds:.0f} |" for s in steps]
    tests = next((s for s in steps if s.name == "test-gpu"), None)
    if tests is not None:
        lines += ["", f"**test-gpu summary:** {test_summary(tests)}"]
    for s in steps:
        if s.status.startswith("not run"):
            continue
        lines += ["", f"## {s.name}: {s.status}, {s.seconds:.0f} s", "", f"`{' '.join(s.cmd)}`", ""]
        lines += [f"({note})" for note in s.notes]
        lines += ["```", s.output, "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=570.0, help="seconds for all steps together (default 570)")
    p.add_argument("--skip-install", action="store_true", help="the cuda extra is installed already")
    p.add_argument("--out", type=Path, default=ROOT / "outputs" / "gpu_check", help="folder of the report")
    args = p.parse_args(argv)
    gpu = cuda_device()
    if gpu is None:
        print("gpu-check: no CUDA device visible to torch on this machine; nothing checked, nothing written")
        return 2
    deadline = time.monotonic() + args.budget
    steps = plan(args.skip_install)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{datetime.datetime.now():%Y-%m-%d_%H%M%S}.md"
    head = header(gpu)
    for i, step in enumerate(steps):
        left = deadline - time.monotonic()
        share = left / (len(steps) - i)
        limit = min(step.cap, left) if step.cap is not None else share
        if left < 5:
            step.status = "not run: total budget spent"
        else:
            print(f"gpu-check: {step.name} (limit {limit:.0f} s)", flush=True)
            run_step(step, limit)
            print(f"gpu-check: {step.name}: {step.status}, {step.seconds:.0f} s", flush=True)
        path.write_text(report(head, steps))
    print(path.read_text())
    print(f"gpu-check: report written to {path}")
    return 0 if all(s.status == "ok" for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
