"""The session's private SLURM cluster (tests/cluster/slurm_cluster.py). Without SLURM's Debian
packages (or without root, which slurmd needs) the cluster tests are skipped with one line naming
the install command; CI sets MEMEXP_REQUIRE_CLUSTER=1, which makes that skip a failure."""

import os

import pytest
from slurm_cluster import INSTALL, missing_programs, start

REQUIRE = "MEMEXP_REQUIRE_CLUSTER"


def _unavailable() -> str | None:
    missing = missing_programs()
    if missing:
        return f"the SLURM cluster tests need {', '.join(missing)}: {INSTALL}"
    if os.geteuid() != 0:
        return "the SLURM cluster tests run slurmd, which needs root"
    return None


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    reason = _unavailable()
    if reason:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{reason} ({REQUIRE}=1: CI runs them)", pytrace=False)
        pytest.skip(reason)
    # room for every job the tests run at once (4 array tasks, a time-limited job): one CPU each
    cluster = start(tmp_path_factory.mktemp("slurm"), cpus=6)
    yield cluster
    cluster.stop()
