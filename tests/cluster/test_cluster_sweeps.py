"""Sweeps on a real SLURM cluster (the session's one-node cluster, conftest.py), each started as a
user types it: `python -m memexp run -m hydra/launcher=slurm_local ...`.

- a sweep is one job array whose shards `report` merges;
- a job that reaches its time limit is requeued and resumes from its records;
- a job requeued by the scheduler (`scontrol requeue`) resumes; the run lock lets the requeued job
  take over its dead predecessor's lock and refuses a second live writer;
- a job that fails leaves one line in its log and the sweep's exit names it;
- a refused submission is one line; `memexp status` follows the jobs.

The time-limited sweep needs a minute of SLURM's clock; it is started first and runs beside the
other tests (the node has a CPU for each)."""

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from helpers.memexp_process import memexp, popen

pytestmark = pytest.mark.slow

# the tiny random GDN on 1,024-token RULER needles: a run of NUM examples takes ~50 s of one idle
# core, longer than the 15 to 45 s after which slurmctld signals a job with a one-minute time limit
# (slurm_local's signal_delay_s)
NUM = 1600
BENCH = ["backbone=tiny_gdn_random", "bench=ruler", "bench.tasks=[niah_single_1]", "bench.lengths=[1024]",
         "bench.max_new_tokens=4", f"bench.num_samples={NUM}", "progress=false"]
SLURM = ["run", "-m", "hydra/launcher=slurm_local"]
SHARDS = 4  # the array sweep's tasks


def environment(cluster, root: Path) -> dict:
    return {**cluster.env, "MEMEXP_ROOT": str(root), "OMP_NUM_THREADS": "1"}


def run_memexp(cluster, root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    root.mkdir(parents=True, exist_ok=True)
    return memexp(*args, cwd=root, env=environment(cluster, root), timeout=timeout)


def start_memexp(cluster, root: Path, *args: str) -> subprocess.Popen:
    root.mkdir(parents=True, exist_ok=True)
    return popen(*args, cwd=root, env=environment(cluster, root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True)


def the_sweep(root: Path) -> Path:
    (sweep,) = (root / "outputs" / "multirun").iterdir()
    return sweep


def errors(stderr: str) -> list[str]:
    """stderr's own lines: without submitit's warnings that this cluster keeps no accounting (sacct)."""
    return [line for line in stderr.splitlines() if line.strip() and "sacct" not in line
            and "accounting storage is disabled" not in line and not line.startswith("[")]


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def keys(recs: list[dict]) -> list[tuple[str, str]]:
    return [(r["example_id"], r["question_id"]) for r in recs]


def job_run_folder(sweep: Path, num: int) -> Path:
    return Path((sweep / str(num) / "run_folder.txt").read_text().strip())


def wait_for(condition, timeout_s: float, what: str, poll_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def starts(log: Path) -> list[int]:
    """How many questions each start of a job found already recorded (the runner's first line)."""
    text = log.read_text() if log.is_file() else ""
    return [int(n) for n in re.findall(r"\((\d+) questions already recorded\)", text)]


@pytest.fixture(scope="module")
def time_limit_sweep(cluster, tmp_path_factory):
    """One job with a one-minute time limit, more work than a minute holds, and room for many requeues."""
    root = tmp_path_factory.mktemp("time_limit")
    proc = start_memexp(cluster, root, *SLURM, "hydra.launcher.timeout_min=1", "hydra.launcher.max_num_timeout=100",
                        "method=plain", *BENCH)
    yield proc, root
    if proc.poll() is None:
        proc.kill()


@pytest.fixture(scope="module")
def array_sweep(cluster, time_limit_sweep, tmp_path_factory):
    """BENCH with the plain method in SHARDS shards as one job array (the time-limited sweep is already
    under way): the uninterrupted reference for the time-limited job, at the cost of one run."""
    root = tmp_path_factory.mktemp("array")
    shards = ",".join(f"{i}/{SHARDS}" for i in range(SHARDS))
    out = run_memexp(cluster, root, *SLURM, "method=plain", f"bench.shard={shards}", *BENCH)
    assert out.returncode == 0, out.stderr[-3000:]
    return the_sweep(root)


def test_a_sweep_is_one_job_array_and_report_merges_its_shards(cluster, array_sweep):
    sweep = array_sweep
    job_ids = sorted(p.name for p in (sweep / ".submitit").iterdir() if p.name[0].isdigit() and "_" in p.name)
    assert len({j.split("_")[0] for j in job_ids}) == 1 and len(job_ids) == SHARDS  # one array, a task per shard
    array = job_ids[0].split("_")[0]
    # squeue lets go of the array once its last task's processes have exited
    wait_for(lambda: not [j for j, _ in cluster.queue() if j.split("_")[0] == array], 60, "squeue to be empty")
    for job_id in job_ids:
        assert (sweep / ".submitit" / job_id / f"{job_id}_0_log.out").is_file()  # submitit's logs
    for num in range(SHARDS):
        run = job_run_folder(sweep, num)
        summary = json.loads((run / "summary.json").read_text())
        assert summary["complete"] and summary["shard_examples"] == NUM // SHARDS
        assert len(set(keys(records(run)))) == len(records(run)) == NUM // SHARDS
    report = memexp("report", str(sweep), "--markdown", env=cluster.env, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    rows = [line for line in report.stdout.splitlines() if line.startswith("|") and "plain" in line]
    assert len(rows) == 1 and f"(n={NUM})" in rows[0], report.stdout  # the shards merged into one row
    status = run_memexp(cluster, sweep.parent, "status", str(sweep))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    part = NUM // SHARDS
    assert len(lines) == SHARDS and all(" done " in line and f"{part}/{part} examples" in line for line in lines)


def test_a_time_limit_requeues_the_job_and_it_resumes_from_its_records(cluster, time_limit_sweep, array_sweep):
    proc, root = time_limit_sweep
    _, stderr = proc.communicate(timeout=540)
    assert proc.returncode == 0, stderr[-3000:]
    sweep = the_sweep(root)
    (job_id,) = [p.name for p in (sweep / ".submitit").iterdir() if p.name[0].isdigit() and "." not in p.name]
    restarts = int(re.search(r"Restarts=(\d+)", cluster.run("scontrol", "show", "job", job_id).stdout).group(1))
    assert restarts >= 1  # the time limit's signal requeued it
    log = sweep / ".submitit" / job_id / f"{job_id}_0_log.err"
    resumed = [n for n in starts(log) if n > 0]
    assert resumed and max(resumed) < NUM, log.read_text()[-3000:]  # a start found part of the run recorded
    run = job_run_folder(sweep, 0)
    got = records(run)
    assert len(got) == len(set(keys(got))) == NUM  # none lost, none recorded twice
    # the same answers and summary as the uninterrupted runs of the same configuration: the array
    # sweep's shards
    reference = {k: r["prediction"] for num in range(SHARDS) for r in records(job_run_folder(array_sweep, num))
                 for k in [(r["example_id"], r["question_id"])]}
    assert {(r["example_id"], r["question_id"]): r["prediction"] for r in got} == reference
    summary = json.loads((run / "summary.json").read_text())
    shard_scores = [json.loads((job_run_folder(array_sweep, n) / "summary.json").read_text()) for n in range(SHARDS)]
    assert summary["complete"] and summary["num_questions"] == sum(s["num_questions"] for s in shard_scores)
    assert summary["overall"] == pytest.approx(sum(s["overall"] * s["num_questions"] for s in shard_scores) / NUM)


def test_a_preempted_job_resumes_and_the_run_lock_takes_over_only_a_dead_holder(cluster, tmp_path):
    root = tmp_path / "preempt"
    bench = [*BENCH[:-2], "bench.num_samples=600", "progress=false"]
    proc = start_memexp(cluster, root, *SLURM, "method=plain", *bench)
    try:
        sweep = wait_for(lambda: next((root / "outputs" / "multirun").glob("*/0/run_folder.txt"), None), 120,
                         "the job to start").parents[1]
        run = job_run_folder(sweep, 0)
        wait_for(lambda: (run / "records.jsonl").is_file() and len(records(run)) >= 5, 120, "the first records")
        holder = json.loads((run / "run.lock").read_text())["pid"]
        status = run_memexp(cluster, root, "status", str(sweep))
        assert " running " in status.stdout, status.stdout + status.stderr
        # the job is stopped (SIGSTOP, alive) while a second writer tries the folder: a job that
        # ran on could finish its 600 examples before the requeue below on an idle machine
        (job_id,) = [j for j, state in cluster.queue() if state == "RUNNING"]
        cluster.run("scontrol", "suspend", job_id)
        # a second writer while the job lives: refused, naming the holder
        local = run_memexp(cluster, root, "run", "method=plain", *bench)
        assert local.returncode == 1 and f"is in use by pid {holder}" in local.stderr, local.stderr[-2000:]
        cluster.run("scontrol", "resume", job_id)
        cluster.run("scontrol", "requeue", job_id)
        # SLURM restarts a requeued job once its old credential expires (5 s here): hold it queued
        # until `status` has seen it so
        wait_for(lambda: dict(cluster.queue()).get(job_id) == "PENDING", 30, "the requeued job to be pending")
        cluster.run("scontrol", "hold", job_id)
        status = run_memexp(cluster, root, "status", str(sweep))
        assert " pending " in status.stdout, status.stdout + status.stderr
        cluster.run("scontrol", "release", job_id)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    got = records(run)
    assert len(got) == len(set(keys(got))) == 600  # none lost, none recorded twice
    log = sweep / ".submitit" / job_id / f"{job_id}_0_log.err"
    assert any(n >= 5 for n in starts(log)), log.read_text()[-3000:]  # the requeued job resumed
    assert json.loads((run / "run.lock").read_text())["pid"] != holder  # it took over the dead job's lock
    status = run_memexp(cluster, root, "status", str(sweep))
    assert " done " in status.stdout and "600/600 examples" in status.stdout, status.stdout


def test_a_failing_job_is_one_line_in_its_log_and_the_sweep_names_it(cluster, tmp_path):
    good, empty = tmp_path / "good", tmp_path / "empty"
    good.mkdir()
    empty.mkdir()
    row = {"input": "What is 0?", "context": "Passage one. Passage two.", "answers": ["answer 0"], "length": 1200,
           "dataset": "qasper", "language": "en", "all_classes": None, "_id": "qasper-0"}
    (good / "qasper.jsonl").write_text(json.dumps(row) + "\n")
    root = tmp_path / "root"
    # the data folder exists at submission (the pre-check passes); its file is missing in the job
    out = run_memexp(cluster, root, *SLURM, "backbone=tiny_gdn_random", "method=plain", "bench=longbench",
                     "bench.tasks=[qasper]", f"bench.data_path={good},{empty}", "progress=false")
    sweep = the_sweep(root)
    assert out.returncode == 1, out.stderr[-3000:]
    (line,) = errors(out.stderr)
    (failed_id,) = [p.name for p in (sweep / ".submitit").iterdir() if p.name.endswith("_1")]
    log = sweep / ".submitit" / failed_id / f"{failed_id}_0_log.err"
    assert line.startswith(f"memexp: 1 of 2 jobs failed: #1 (bench.data_path={empty}) bench=longbench: ")
    assert f"log {log};" in line and f"python -m memexp status {sweep}" in line
    (in_log,) = [x for x in log.read_text().splitlines() if x.startswith("memexp: ")]
    assert f"{empty}/qasper.jsonl not found" in in_log
    assert json.loads((job_run_folder(sweep, 0) / "summary.json").read_text())["complete"]  # the other job ran
    status = run_memexp(cluster, root, "status", str(sweep)).stdout.splitlines()
    assert " done " in status[0] and " failed " in status[1] and str(log) in status[1]


def test_a_refused_submission_is_one_line_and_writes_nothing(cluster, tmp_path):
    out = run_memexp(cluster, tmp_path, *SLURM, "hydra.launcher.partition=nope", "backbone=tiny_gdn_random",
                     "method=plain", "progress=false")
    assert out.returncode == 1, out.stderr[-3000:]
    assert errors(out.stderr) == ["memexp: the sweep was not submitted: sbatch: error: invalid partition specified: "
                                  "nope; error: Batch job submission failed: Invalid partition name specified; "
                                  "check hydra.launcher.partition"]
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_a_grouped_sweep_is_one_array_task_per_group_and_records_what_its_jobs_record_alone(cluster, tmp_path):
    """B x R on SLURM: the four jobs share their reads, so one job is submitted; every job's
    records and summary equal those of the same jobs run alone (share_reads=false, one process)."""
    grid = ["backbone=tiny_gdn_random", "method=notebank", "method.chunk_size=128", "bench=ruler",
            "bench.tasks=[niah_single_1]", "bench.lengths=[640]", "bench.max_new_tokens=6", "bench.num_samples=3",
            "progress=false", "method.replay_budget=1,2", "method.span_budget=16,32"]
    root = tmp_path / "grouped"
    out = run_memexp(cluster, root, *SLURM, *grid)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep = the_sweep(root)
    submitted = [p.name for p in (sweep / ".submitit").iterdir() if p.name[0].isdigit()]
    assert len(submitted) == 1, submitted  # one SLURM job (an array of one task) runs the group
    alone = run_memexp(cluster, tmp_path / "alone", "run", "-m", *grid, "share_reads=false")
    assert alone.returncode == 0, alone.stderr[-3000:]
    status = run_memexp(cluster, root, "status", str(sweep))
    assert status.returncode == 0 and len(status.stdout.splitlines()) == 4, status.stdout
    for num in range(4):
        run = job_run_folder(sweep, num)
        (twin,) = (tmp_path / "alone").rglob(f"runs/**/{run.name}")
        assert [{k: v for k, v in r.items() if k != "seconds"} for r in records(run)] == \
               [{k: v for k, v in r.items() if k != "seconds"} for r in records(twin)]
        assert json.loads((run / "summary.json").read_text()) == json.loads((twin / "summary.json").read_text())
        assert " done " in status.stdout.splitlines()[num]
