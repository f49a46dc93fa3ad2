"""`memexp status` on a sweep folder of a launcher without a scheduler (job folders only), built by
hand: each state from what the jobs left (the cluster tests cover SLURM's pending and running)."""

import json
from pathlib import Path

from memexp.cluster.status import status_lines
from memexp.run.lock import RunLock


def job(sweep: Path, num: int, overrides: list[str], run: Path, recorded: int, expected: int | None = None,
        summary: dict | None = None) -> Path:
    folder = sweep / str(num)
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (folder / "run_folder.txt").write_text(f"{run}\n")
    run.mkdir(parents=True)
    (run / "records.jsonl").write_text("".join(json.dumps({"example_id": f"e{i}", "question_id": "q"}) + "\n"
                                               for i in range(recorded)))
    if expected is not None:
        (run / "expected_examples.txt").write_text(f"{expected}\n")
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))
    return folder


def test_status_reads_each_jobs_state_and_progress(tmp_path):
    sweep, runs = tmp_path / "multirun" / "2025-01-31_12-00-00", tmp_path / "runs"
    job(sweep, 0, ["method=plain", "bench.shard=0/2"], runs / "a", 3, summary={"complete": True, "expected_examples": 3})
    job(sweep, 1, ["method=plain", "bench.shard=1/2"], runs / "b", 1, expected=3)
    job(sweep, 2, ["method=jrt", "bench.shard=0/2"], runs / "c", 2, expected=3)
    failed = job(sweep, 3, ["method=jrt", "bench.shard=1/2"], runs / "d", 0)
    (failed / "failed.json").write_text(json.dumps({"error": "bench=longbench: qasper.jsonl not found", "log": None}))
    with RunLock(runs / "b"):  # job 1 is being written by a live process
        lines = status_lines(sweep, queue={})
    assert [line.split()[:2] for line in lines] == [["#0", "done"], ["#1", "running"], ["#2", "stopped"],
                                                     ["#3", "failed"]]
    assert "3 questions  3/3 examples" in lines[0] and "1 questions  1/3 examples" in lines[1]
    assert "2 questions  2/3 examples" in lines[2] and "0 questions  0/? examples" in lines[3]
    assert lines[0].endswith("(method=plain bench.shard=0/2)")  # the overrides that tell the jobs apart
    assert lines[3].endswith("bench=longbench: qasper.jsonl not found") and f"log {failed}" in lines[3]


def test_a_job_its_groups_launched_job_runs_takes_that_jobs_state(tmp_path):
    """Shared reads (memexp.cli.sweeper): job 1 runs inside launched job 0 (SLURM job 7_0), so while
    7_0 is queued or running job 1 is too, and it names 7_0's log."""
    from memexp.cluster.status import job_state
    from memexp.cluster.sweep_folder import SweepJob, _follow_groups
    from memexp.run.groups import write_plan

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    write_plan(sweep, [[{"num": 0, "overrides": ["method.replay_budget=1"], "config": {}},
                        {"num": 1, "overrides": ["method.replay_budget=2"], "config": {}}]])
    log = sweep / ".submitit" / "7_0" / "7_0_0_log.err"
    jobs = {0: SweepJob(0, ["method.replay_budget=1"], sweep / "0", "7_0", log),
            1: SweepJob(1, ["method.replay_budget=2"], sweep / "1")}
    _follow_groups(sweep, jobs)
    assert (jobs[1].job_id, jobs[1].log) == ("7_0", log)
    assert job_state(jobs[1], {"7_0": "PENDING"}) == job_state(jobs[0], {"7_0": "PENDING"}) != "stopped"
