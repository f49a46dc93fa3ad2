"""Fixtures of the report tests; the run folders they build are made by report_runs.make_run."""

import pytest
from report_runs import make_run


@pytest.fixture
def runs_factory():
    return make_run
