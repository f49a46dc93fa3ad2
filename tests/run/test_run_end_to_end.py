"""`python -m memexp run` end to end on the tiny random GDN: run folder, resume, SIGKILL, multirun.
What a kill or a logger's service process needs runs in its own process; the rest runs the command
line's main in this one (memexp_here)."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers.memexp_process import memexp, memexp_here, popen

ARGS = ["backbone=tiny_gdn_random", "method=plain", "bench=ruler", "bench.tasks=[niah_single_1]",
        "bench.lengths=[512]", "bench.max_new_tokens=12", "progress=false"]


def memexp_run(out: Path, *extra: str, **kw) -> subprocess.CompletedProcess:
    return memexp("run", *ARGS, f"output_dir={out}", *extra, **kw)


def run_here(capfd, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return memexp_here(capfd, "run", *ARGS, f"output_dir={out}", *extra)


def only_folder(out: Path) -> Path:
    folders = [p.parent for p in out.rglob("config.yaml")]
    assert len(folders) == 1, folders
    return folders[0]


def stable(records: list[dict]) -> list[dict]:
    """Records without wall-clock fields."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def read_records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]


def test_run_writes_the_folder_and_a_rerun_recomputes_nothing(tmp_path, capfd):
    first = run_here(capfd, tmp_path, "bench.num_samples=3")
    assert first.returncode == 0, first.stderr
    folder = only_folder(tmp_path)
    assert folder.relative_to(tmp_path).parts[:3] == ("ruler", "tiny_gdn_random", "plain")
    records = read_records(folder)
    assert len(records) == 3
    for r in records:
        assert {"example_id", "question_id", "task", "length", "prediction", "references", "score", "tokens",
                "seconds", "method_stats"} <= set(r)
        assert r["tokens"]["context"] + r["tokens"]["question"] + 12 <= 512
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["num_questions"] == 3 and summary["complete"]
    assert "niah_single_1" in first.stdout  # the final task x length table
    before = (folder / "records.jsonl").read_bytes()

    again = run_here(capfd, tmp_path, "bench.num_samples=3")
    assert again.returncode == 0, again.stderr
    assert "(3 questions already recorded)" in again.stderr
    assert (folder / "records.jsonl").read_bytes() == before


def test_each_session_records_the_torch_threads_it_ran_on(tmp_path, capfd):
    """provenance.json's sessions say how many torch CPU threads ran the model (a wall time is read
    with it): threads=1, then a resume with threads=2, in the same folder."""
    for threads in (1, 2):
        out = run_here(capfd, tmp_path, "bench.num_samples=1", f"threads={threads}")
        assert out.returncode == 0, out.stderr
    sessions = json.loads((only_folder(tmp_path) / "provenance.json").read_text())["sessions"]
    assert [s["torch_threads"] for s in sessions] == [1, 2]


def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path, capfd):
    n = 8
    whole = run_here(capfd, tmp_path / "whole", f"bench.num_samples={n}")
    assert whole.returncode == 0, whole.stderr

    killed = tmp_path / "killed"
    args = ["run", *ARGS, f"output_dir={killed}", f"bench.num_samples={n}"]
    proc = popen(*args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline:
        rec = list(killed.rglob("records.jsonl"))
        if rec and rec[0].read_bytes().count(b"\n") >= 2:
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = read_records(only_folder(killed))
    assert 2 <= len(partial) < n, "the kill must land mid-run"

    resumed = memexp(*args)
    assert resumed.returncode == 0, resumed.stderr
    a, b = only_folder(tmp_path / "whole"), only_folder(killed)
    assert a.name == b.name  # same config, same folder name
    assert stable(read_records(a)) == stable(read_records(b))
    sa, sb = (json.loads((f / "summary.json").read_text()) for f in (a, b))
    assert sa == sb


def test_multirun_writes_one_folder_per_job(tmp_path, capfd):
    """-m after overrides (Hydra's own parser takes its flags only before them; memexp reorders)."""
    out = memexp_here(capfd, "run", *ARGS, "-m", f"output_dir={tmp_path}", "bench.num_samples=1", "bench.lengths=[512],[640]",
                 f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert out.returncode == 0, out.stderr
    summaries = sorted(tmp_path.rglob("summary.json"))
    assert len(summaries) == 2
    lengths = sorted(next(iter(json.loads(p.read_text())["scores"]["niah_single_1"])) for p in summaries)
    assert lengths == ["512", "640"]


@pytest.mark.parametrize("logger", ["none", "wandb"])
def test_loggers_never_fail_a_run_offline(tmp_path, logger):
    out = memexp_run(tmp_path, "bench.num_samples=1", f"logger={logger}", env={"WANDB_MODE": "offline"})
    assert out.returncode == 0, out.stderr
    folder = only_folder(tmp_path)
    assert (folder / "summary.json").exists()
    assert (folder / "wandb").exists() == (logger == "wandb")
