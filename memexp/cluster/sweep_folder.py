"""The jobs of a sweep folder (multirun/<time>/), read from what the launcher and the jobs wrote:
submitit's `.submitit/<job id>/` (the submitted job, its result, its logs) where jobs went
through submitit, and each job's folder `<num>/` (Hydra's overrides, the pointer to the run
folder, memexp.cluster.job_failure's marker)."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import yaml

from memexp.cluster.job_failure import read_failure
from memexp.run.groups import read_plan
from memexp.run.jobs import POINTER
from memexp.run.tracking import swept_keys


@dataclass
class SweepJob:
    num: int  # Hydra's job number: the job folder <sweep>/<num>
    overrides: list[str]
    folder: Path
    job_id: str | None = None  # submitit's job id ("12_3": SLURM array 12, task 3); None without submitit
    log: Path | None = None  # the job's stderr log
    outcome: str | None = None  # "done" or "failed" once the job ended with a result, else None
    error: str | None = None  # one line saying why it failed
    swept: frozenset[str] = frozenset()  # the override keys whose values differ between the sweep's jobs

    @property
    def run_folder(self) -> Path | None:
        pointer = self.folder / POINTER
        return Path(pointer.read_text().strip()) if pointer.is_file() else None

    @property
    def label(self) -> str:
        """The overrides that tell this job apart (every one in a sweep of one job), as the user typed
        them (memexp.cli.app adds ++ to schema fields)."""
        typed = [o.lstrip("+~") for o in self.overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]
        return " ".join(o for o in typed if not self.swept or o.partition("=")[0] in self.swept)


def sweep_jobs(sweep: Path) -> list[SweepJob]:
    """Every job of the sweep, submitted or started, by job number."""
    sweep = Path(sweep)
    jobs: dict[int, SweepJob] = {}
    submitit = sweep / ".submitit"
    for folder in sorted(submitit.iterdir()) if submitit.is_dir() else ():
        submitted = folder / f"{folder.name}_submitted.pkl"
        if not submitted.is_file():  # a submission sbatch refused leaves only its temporary pickles
            continue
        overrides, num = _submitted(submitted)
        outcome, error = _result(folder / f"{folder.name}_0_result.pkl")
        jobs[num] = SweepJob(num, overrides, sweep / str(num), folder.name, folder / f"{folder.name}_0_log.err",
                             outcome, error)
    for folder in sweep.iterdir() if sweep.is_dir() else ():
        if folder.name.isdigit() and int(folder.name) not in jobs:  # a launcher without submitit
            overrides_file = folder / ".hydra" / "overrides.yaml"
            overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.is_file() else []
            jobs[int(folder.name)] = SweepJob(int(folder.name), overrides or [], folder)
    _follow_groups(sweep, jobs)
    swept = frozenset(swept_keys([j.overrides for j in jobs.values()]))
    for job in jobs.values():
        job.swept = swept
        failure = read_failure(job.folder)
        if failure is not None:  # the job's own one line beats submitit's view (it returned normally)
            job.outcome, job.error = "failed", failure.get("error")
            job.log = Path(failure["log"]) if failure.get("log") else job.log
    return [jobs[n] for n in sorted(jobs)]


def _follow_groups(sweep: Path, jobs: dict[int, SweepJob]) -> None:
    """A job its group's launched job runs (memexp.run.groups: shared reads) has no submission of its
    own: it is queued, runs and ends with the launched job, whose id, log and outcome it takes."""
    for group in read_plan(sweep) or ():
        launched = jobs.get(group[0]["num"])
        for member in group[1:]:
            job = jobs.get(member["num"])
            if launched is None or job is None or job.job_id is not None:
                continue
            job.job_id, job.log, job.outcome, job.error = launched.job_id, launched.log, launched.outcome, launched.error


def _submitted(path: Path) -> tuple[list[str], int]:
    """The overrides and job number a submitit job was submitted with (the arguments of Hydra's
    submitit launcher's job: overrides, the sweep-dir key, the job number, ...)."""
    from submitit.core.utils import DelayedSubmission

    args = DelayedSubmission.load(path).args
    return list(args[0]), int(args[2])


def _result(path: Path) -> tuple[str | None, str | None]:
    """("done" | "failed", why) from submitit's result pickle; (None, None) while there is none."""
    if not path.is_file():
        return None, None
    with open(path, "rb") as f:
        outcome, value = pickle.load(f)
    if outcome == "error":  # the job raised: value is its traceback
        lines = [line for line in str(value).splitlines() if line.strip()]
        return "failed", lines[-1] if lines else "failed"
    status = getattr(getattr(value, "status", None), "name", "COMPLETED")
    if status == "FAILED":  # Hydra's run_job caught the task's exception
        return "failed", (str(value._return_value).splitlines() or ["failed"])[0]
    return "done", None


def recorded(run_folder: Path | None) -> tuple[int, int, int | None]:
    """(questions recorded, examples with a record, examples the run expects or None while unknown)."""
    if run_folder is None:
        return 0, 0, None
    questions, examples = 0, set()
    records = run_folder / "records.jsonl"
    if records.is_file():
        for line in records.read_bytes().splitlines():
            try:
                examples.add(str(json.loads(line)["example_id"]))
                questions += 1
            except (ValueError, KeyError, TypeError):  # a partial last line of a running job
                continue
    return questions, len(examples), _expected_examples(run_folder)


def _expected_examples(run_folder: Path) -> int | None:
    summary = run_folder / "summary.json"
    if summary.is_file():
        try:
            return json.loads(summary.read_text()).get("expected_examples")
        except ValueError:
            pass
    expected = run_folder / "expected_examples.txt"  # written by the runner when it starts
    return int(expected.read_text()) if expected.is_file() else None
