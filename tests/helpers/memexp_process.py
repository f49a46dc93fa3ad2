"""Start memexp the way a user does, `python -m memexp ...` in its own process: offline,
single-threaded, W&B off, importing THIS checkout's memexp whatever copy is installed (the
process may start in a temporary folder). Every test that starts memexp in a subprocess does it
through here; tests whose claim is not about the process itself run memexp in-process instead
(`memexp_here`)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
# this checkout first; the caller's PYTHONPATH after it (e.g. a plugin package a test adds)
ENV = {**os.environ, **OFFLINE,
       "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
# a few-second run on the tiny random GDN: 3 RULER examples of 512 tokens
TINY = ["backbone=tiny_gdn_random", "method=plain", "bench=ruler", "bench.tasks=[niah_single_1]",
        "bench.lengths=[512]", "bench.max_new_tokens=4", "bench.num_samples=3", "progress=false"]


def environment(extra: dict | None = None) -> dict:
    """ENV with `extra` over it (a whole environment too, e.g. a cluster's); this checkout stays first
    on PYTHONPATH."""
    env = {**ENV, **(extra or {})}
    paths = (str(ROOT), *env.get("PYTHONPATH", "").split(os.pathsep))
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return env


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "memexp", *map(str, args)]


def memexp(*args: str, cwd: Path | None = None, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m memexp *args`, finished; `env` adds to (or overrides) ENV."""
    return subprocess.run(command(*args), cwd=cwd, env=environment(env), capture_output=True, text=True,
                          timeout=timeout)


@contextlib.contextmanager
def process_state_kept():
    """What an in-process memexp changes of the test process, put back: torch's thread count, the
    folder, the environment (a sweep hands its jobs variables) and logging. Hydra configures the
    root logger for a job, and a library imported for the first time during the run (transformers,
    submitit) adds its handler, each on the streams of that moment: under `capfd` or a redirect,
    streams that pytest closes after the test. A later test's log line would then fail in that
    handler and print a traceback into the later test's stderr. Enter it inside any redirect."""
    import logging

    import torch

    threads, here, environ = torch.get_num_threads(), Path.cwd(), dict(os.environ)
    root = logging.getLogger()
    loggers = {name: (lg.level, list(lg.handlers), lg.propagate, lg.disabled)
               for name, lg in root.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    root_state = (root.level, list(root.handlers))
    # the streams of this moment, and what a handler left on them writes to once they are closed
    streams = {id(sys.stdout): sys.__stdout__, id(sys.stderr): sys.__stderr__}
    try:
        yield
    finally:
        os.chdir(here)
        torch.set_num_threads(threads)
        os.environ.clear()
        os.environ.update(environ)
        root.setLevel(root_state[0])
        root.handlers[:] = root_state[1]
        for name, lg in root.manager.loggerDict.items():
            if not isinstance(lg, logging.Logger):
                continue
            if name in loggers:
                lg.level, handlers, lg.propagate, lg.disabled = loggers[name]
                lg.handlers[:] = handlers
            # a logger first made during the run keeps its set-up, on the process's own streams (a
            # handler whose stream is a property, logging's last resort's kind, reads sys.stderr anew)
            for handler in lg.handlers:
                if id(vars(handler).get("stream")) in streams:
                    handler.setStream(streams[id(handler.stream)])
        logging.Logger.manager._clear_cache()


def memexp_here(capfd, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m memexp *args` run in this process: memexp.cli.main.main, the function the command
    line calls, without an interpreter's start (imports paid once per test process). For a claim
    about what memexp prints and returns; a claim about the process itself (signals, locks, what
    an import pulls in) needs `memexp`. `capfd` (pytest's) catches what is printed at the file
    descriptors too, as a subprocess's pipes would; the process's state is kept
    (`process_state_kept`)."""
    from memexp.cli.main import main

    capfd.readouterr()  # what the test printed before is not memexp's
    with process_state_kept():
        if cwd is not None:
            os.chdir(cwd)
        returncode = main(list(map(str, args)))
    printed = capfd.readouterr()
    return subprocess.CompletedProcess(command(*args), returncode, printed.out, printed.err)


def memexp_printed(argv) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m memexp <argv>` run in this process, as far as Python
    code prints it (no fixture needed; `memexp_here` also catches what C code and subprocesses
    write): `--cfg`, `--help`, a wrong value, what a command says."""
    from memexp.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), process_state_kept():
        try:
            returncode = main(list(map(str, argv)))
        except SystemExit as e:  # argparse's --help and usage errors (report) leave as a process would
            returncode = 0 if e.code is None else e.code
    return returncode, out.getvalue(), err.getvalue()


def memexp_ok(*args: str, **kw) -> subprocess.CompletedProcess:
    """memexp(...) that fails the test with memexp's stderr unless it exits 0."""
    result = memexp(*args, **kw)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def popen(*args: str, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen(command(*args), env=environment(env), **kw)


def python(*args: str, cwd: Path | None = None, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python *args` (`-c CODE`, a script) with this checkout's memexp, in a fresh interpreter: for
    what only a new process shows (what an import pulls in, a load from another folder)."""
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=environment(env), capture_output=True,
                          text=True, timeout=timeout)


def error_lines(stderr: str) -> list[str]:
    """stderr without the runner's progress lines."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("[memexp] run folder")]


def memexp_run(workdir: Path, *overrides: str) -> dict:
    """The summary.json of `memexp run` with the plain method on the tiny random backbone, run in
    `workdir` with its runs under workdir/runs."""
    out = workdir / "runs"
    memexp_ok("run", "backbone=tiny_gdn_random", "method=plain", "logger=none", f"output_dir={out}", "progress=false",
              *overrides, cwd=workdir)
    (summary,) = out.glob("*/*/*/*/summary.json")
    return json.loads(summary.read_text())


def run_preset(out: Path, preset: str, method: str, *overrides: str, timeout: int = 1800) -> Path:
    """The run folder of one job of the `experiment=` preset (a RULER preset) under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    memexp_ok("run", f"experiment={preset}", f"method={method}", "logger=none", f"output_dir={out}",
              f"bench.cache_dir={out / 'cache'}", "progress=false", *overrides, cwd=out, timeout=timeout)
    (folder,) = (out / "ruler").glob("*/*/*/")
    return folder


def run_presets(out: Path, preset: str, jobs: dict[str, tuple[str, ...]], timeout: int = 1800) -> dict[str, Path]:
    """Several independent runs of one preset at once, one process each, in out/<name>:
    {name: (method, *overrides)} -> {name: run folder}. A comparison's runs share nothing (each its
    own output and cache folder), so the test waits for the slowest one, not for their sum."""
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        started = {name: pool.submit(run_preset, out / name, preset, method, *overrides, timeout=timeout)
                   for name, (method, *overrides) in jobs.items()}
        return {name: future.result() for name, future in started.items()}


def summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]


def selected(request, test_name: str, params: str = "") -> bool:
    """Whether this session runs the test function `test_name` (after -m / -k selection), or with
    `params` (e.g. "[grouped_values]") that parametrized case: a module fixture then computes what
    the selected tests need, once (the larger runs a smaller test reads its examples from, the
    references of the selected cases only)."""
    return any(getattr(item, "originalname", item.name) == test_name and item.name.endswith(params)
               for item in request.session.items)


def first_examples(records: list[dict], task: str, length: int, count: int) -> list[dict]:
    """The records of examples 0..count-1 of `task` at `length`: those a run of `bench.num_samples=count`
    on the same seed records (a RULER example is a function of its task, length, seed and index; its
    id is task/length/index)."""
    chosen = [r for r in records if r["task"] == task and int(r["length"]) == length
              and int(r["example_id"].rsplit("/", 1)[1]) < count]
    assert len({r["example_id"] for r in chosen}) == count, f"{task} at {length}: fewer than {count} examples"
    return chosen


def mean_score(records: list[dict]) -> float:
    return sum(r["score"] for r in records) / len(records)
