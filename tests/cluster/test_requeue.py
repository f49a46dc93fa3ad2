"""A time-limited job's `scontrol requeue` that SLURM's SIGTERM ends counts as sent
(memexp.cluster.requeue); any other failure of scontrol still fails the job. submitit's own
requeue runs a fake `scontrol` on PATH."""

import subprocess

import pytest
from submitit.slurm.slurm import SlurmJobEnvironment

from memexp.cluster.requeue import harden_requeue


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """Writes the fake scontrol's shell body; the job is 77."""
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setattr(SlurmJobEnvironment, "_requeue", SlurmJobEnvironment._requeue)  # undone after the test

    def write(body: str) -> None:
        path = tmp_path / "scontrol"
        path.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/args\n{body}\n")
        path.chmod(0o755)

    write.args = lambda: (tmp_path / "args").read_text().split()
    return write


def test_submitit_alone_reports_the_requeue_slurm_is_doing_as_failed(scontrol):
    scontrol("kill -TERM $$")
    with pytest.raises(subprocess.CalledProcessError) as failed:
        SlurmJobEnvironment()._requeue(1)
    assert failed.value.returncode == -15 and scontrol.args() == ["requeue", "77"]


def test_a_requeue_ended_by_sigterm_counts_as_sent(scontrol):
    scontrol("kill -TERM $$")
    harden_requeue()
    harden_requeue()  # once per process, however often a job's code asks
    SlurmJobEnvironment()._requeue(1)
    assert scontrol.args() == ["requeue", "77"]


@pytest.mark.parametrize("body", ["exit 1", "kill -KILL $$"])
def test_any_other_failure_of_scontrol_still_fails(scontrol, body):
    scontrol(body)
    harden_requeue()
    with pytest.raises(subprocess.CalledProcessError):
        SlurmJobEnvironment()._requeue(1)
