"""A sweep whose jobs share their reads (memexp.run.groups, memexp.cli.sweeper) records exactly what
its jobs record alone: the same run folders, records (but wall times) and summaries, on every
registered architecture's tiny config, in one process and with joblib; a kill at any moment
resumes without loss or duplicate; a group over its memory bound and a folder another sweep holds
are refused in one line. (The SLURM case: tests/cluster/test_cluster_sweeps.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers.memexp_process import memexp, memexp_here, popen

from memexp.core.registry import ARCHS

BENCH = ["bench=ruler", "bench.tasks=[niah_multikey_1]", "bench.essay_standin=true", "bench.lengths=[640]",
         "bench.num_samples=1", "bench.max_new_tokens=6", "progress=false"]
# every NoteBank field the issue names: R and the router only answer, B and W only write
NOTEBANK_GRID = ["method=notebank", "method.chunk_size=128", "method.replay_budget=1,2", "method.router=native,bm25",
                 "method.span_budget=16,32", "method.write_budget=1,2"]
# the attention-only architecture has no recurrent channels for NoteBank: Plain, its clean start
# (the same read) and JRT's answer-side separator
ATTENTION_GRID = ["method=plain,clean_start"]
TINY = {arch: f"tiny_{arch}_random" for arch in ("gdn", "gdn2", "mamba2", "qwen35", "llama")}


def run_folders(out: Path) -> dict[str, Path]:
    return {str(p.parent.relative_to(out)): p.parent for p in out.rglob("config.yaml")}


def stable(folder: Path) -> list[dict]:
    """The records without their wall times."""
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (folder / "records.jsonl").read_text().splitlines()]


def assert_same_runs(grouped: Path, alone: Path) -> None:
    a, b = run_folders(grouped), run_folders(alone)
    assert sorted(a) == sorted(b)
    for name in a:
        assert stable(a[name]) == stable(b[name]), name
        assert json.loads((a[name] / "summary.json").read_text()) == json.loads((b[name] / "summary.json").read_text())


def sweep(capfd, out: Path, *args: str) -> subprocess.CompletedProcess:
    result = memexp_here(capfd, "run", "-m", *BENCH, *args, f"output_dir={out / 'runs'}",
                         f"hydra.sweep.dir={out / 'sweep'}")
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_every_architecture_is_covered():
    assert sorted(ARCHS.names()) == sorted(TINY)


@pytest.mark.parametrize("arch", list(TINY))
def test_a_grouped_sweep_records_what_its_jobs_record_alone(tmp_path, capfd, arch):
    grid = ATTENTION_GRID if arch == "llama" else NOTEBANK_GRID
    grouped = sweep(capfd, tmp_path / "grouped", f"backbone={TINY[arch]}", *grid)
    jobs = 2 if arch == "llama" else 16
    assert f"{jobs} jobs launched as 1:" in grouped.stderr  # one group: one read per context
    sweep(capfd, tmp_path / "alone", f"backbone={TINY[arch]}", *grid, "share_reads=false")
    assert_same_runs(tmp_path / "grouped" / "runs", tmp_path / "alone" / "runs")
    records = [json.loads(line) for p in (tmp_path / "grouped" / "runs").rglob("records.jsonl")
               for line in p.read_text().splitlines()]
    assert {r["seconds"]["read_shared_by"] for r in records} == {jobs}
    # every job keeps its own job folder pointing at its run folder; the plan names them all
    sweep_dir = tmp_path / "grouped" / "sweep"
    pointers = sorted(sweep_dir.glob("*/run_folder.txt"))
    assert len(pointers) == jobs
    assert {Path(p.read_text().strip()) for p in pointers} == set(run_folders(tmp_path / "grouped" / "runs").values())
    assert all((p.parent / ".hydra" / "overrides.yaml").is_file() for p in pointers)


def test_groups_split_where_the_pass_differs_and_joblib_runs_them_at_once(tmp_path, capfd):
    """C cuts the pass: two chunk sizes are two groups, launched by joblib side by side."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    args = ["backbone=tiny_gdn_random", "method=notebank", "method.chunk_size=128,256", "method.replay_budget=1,2",
            "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    grouped = sweep(capfd, tmp_path / "grouped", *args)
    assert "4 jobs launched as 2:" in grouped.stderr
    sweep(capfd, tmp_path / "alone", *args, "share_reads=false")
    assert_same_runs(tmp_path / "grouped" / "runs", tmp_path / "alone" / "runs")


def test_a_group_over_its_memory_bound_is_refused_before_any_model_loads(tmp_path, capfd):
    out = memexp_here(capfd, "run", "-m", *BENCH, "backbone=tiny_gdn_random", "method=notebank",
                      "method.span_budget=16,32,64", "method.replay_budget=1,2", "share_reads_max_memories=2",
                      f"output_dir={tmp_path / 'runs'}", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "memexp: share_reads_max_memories=2: jobs #0, #1, #2, #3, #4, #5 share each context's read and would hold 3 "
        "memories (one archive each, beside one shared state) at once; raise share_reads_max_memories to 3 or run "
        "them apart with share_reads=false"]
    assert not run_folders(tmp_path) and not (tmp_path / "sweep").exists()


def test_a_killed_grouped_sweep_resumes_without_loss_or_duplicate(tmp_path, capfd):
    """SIGKILL while the group's jobs are mid-way, then the same command again: every job's records
    equal those of its uninterrupted solo run."""
    args = ["backbone=tiny_gdn_random", "method=notebank", "method.chunk_size=128", "method.replay_budget=1,2",
            "method.span_budget=16,32", "bench.tasks=[niah_single_1]", "bench.num_samples=8", "bench.lengths=[640]",
            "bench.max_new_tokens=6", "progress=false"]
    killed = tmp_path / "killed"
    command = ["run", "-m", *args, f"output_dir={killed}", f"hydra.sweep.dir={tmp_path / 'sweep1'}"]
    proc = popen(*command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline:
        counts = [p.read_bytes().count(b"\n") for p in killed.rglob("records.jsonl")]
        if len(counts) == 4 and sum(counts) >= 6:
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    counts = [p.read_bytes().count(b"\n") for p in killed.rglob("records.jsonl")]
    assert 6 <= sum(counts) < 32, "the kill must land mid-sweep"
    resumed = memexp("run", "-m", *args, f"output_dir={killed}", f"hydra.sweep.dir={tmp_path / 'sweep2'}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "already recorded" in resumed.stderr
    whole = memexp_here(capfd, "run", "-m", *args, "share_reads=false", f"output_dir={tmp_path / 'whole'}",
                        f"hydra.sweep.dir={tmp_path / 'sweep3'}")
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert_same_runs(killed, tmp_path / "whole")
    assert all(len(stable(f)) == 8 for f in run_folders(killed).values())


def test_two_grouped_sweeps_that_share_a_job_folder_respect_its_lock(tmp_path):
    """A second sweep with one job in common with a running one stops in one line naming the
    folder, before it writes anything; the first sweep's records stay whole and unique."""
    base = ["run", "-m", "backbone=tiny_gdn_random", "method=notebank", "method.chunk_size=128", "bench.tasks=[niah_single_1]",
            "bench.lengths=[640]", "bench.max_new_tokens=6", "progress=false", "bench.num_samples=2000",
            f"output_dir={tmp_path / 'runs'}"]
    first = popen(*base, "method.replay_budget=1,2", f"hydra.sweep.dir={tmp_path / 's1'}", stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and len(list((tmp_path / "runs").rglob("records.jsonl"))) < 2:
            time.sleep(0.01)
        second = memexp(*base, "method.replay_budget=2,3", f"hydra.sweep.dir={tmp_path / 's2'}")
        assert first.poll() is None, "the first sweep must still hold its folders"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert second.returncode == 1
    lines = [line for line in second.stderr.splitlines() if line.startswith("memexp:")]
    assert len(lines) == 1 and f"is in use by pid {first.pid}" in lines[0], second.stderr[-2000:]
    folders = run_folders(tmp_path / "runs")
    assert len(folders) == 2  # the second sweep's own job (R=3) never started: its group stopped first
    for folder in folders.values():
        keys = [(r["example_id"], r["question_id"]) for r in stable(folder)]
        assert len(keys) == len(set(keys))


@pytest.mark.parametrize("preset,sizes", [
    ("paper_budgets_gdn", [9]),  # B x R: one pass
    ("paper_routers_ruler", [5, 5]),  # the routers of each backbone
    ("paper_oracle_ruler", [2, 2]),
    ("paper_memoryagentbench_mamba2_8b", [1, 2]),  # Plain and its clean start; NoteBank alone
    ("paper_ruler_niah", [1] * 9),  # Plain, JRT and NoteBank read differently
])
def test_the_paper_presets_share_reads_where_their_points_can(preset, sizes):
    from memexp.cli.app import preflight
    from memexp.run.groups import plan_groups

    jobs = preflight([f"experiment={preset}"], multirun=True, files=False)
    assert sorted(len(g) for g in plan_groups(jobs)) == sorted(sizes)
    assert jobs.grouped == (max(sizes) > 1)


def test_a_sweep_launched_alone_into_a_grouped_sweeps_folder_runs_its_own_jobs(tmp_path, capfd):
    """share_reads=false into the folder a grouped sweep left its plan in: each job runs itself only."""
    args = ["backbone=tiny_gdn_random", "method=notebank", "method.chunk_size=128", "method.replay_budget=1,2"]
    sweep(capfd, tmp_path, *args)
    assert (tmp_path / "sweep" / "shared_reads.json").is_file()
    alone = sweep(capfd, tmp_path, *args, "method.span_budget=16", "share_reads=false")
    assert "jobs share one read" not in alone.stderr
    assert alone.stderr.count("questions already recorded") == 2  # each job its own folder, once
