"""The suite runs memexp in its own process (`memexp_here`, `memexp_printed`) where the process is not
what a test is about. A run configures logging (Hydra's handlers on the streams of that moment); if
that outlived the test, a later test's log line would go to a stream pytest has closed and print a
traceback into that test's stderr, which the one-line error tests then read (CI, 2026-12-05)."""

import logging
import sys

from helpers.memexp_process import TINY, memexp_here, process_state_kept


def handlers():
    """The handlers and level of the root logger and of Hydra's loggers (those a run configures)."""
    loggers = {"": logging.getLogger()} | {name: lg for name, lg in logging.Logger.manager.loggerDict.items()
                                           if isinstance(lg, logging.Logger) and name.split(".")[0] == "hydra"}
    return {name: (lg.level, list(lg.handlers)) for name, lg in loggers.items()}


def test_a_run_in_this_process_leaves_logging_as_it_found_it(capfd, tmp_path):
    before = handlers()
    result = memexp_here(capfd, "run", *TINY, "logger=none", f"output_dir={tmp_path / 'runs'}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Logging error" not in result.stderr
    after = handlers()
    assert {k: after[k] for k in before} == before


def test_a_library_logger_made_during_the_run_is_left_on_the_process_streams(capfd):
    """A module imported for the first time inside an in-process run keeps its handler, but not on
    the captured stream of that test, which pytest closes."""
    name = "a_library_first_imported_during_the_run"
    with process_state_kept():
        logging.getLogger(name).addHandler(logging.StreamHandler(sys.stderr))
    (handler,) = logging.getLogger(name).handlers
    try:
        assert handler.stream is sys.__stderr__
    finally:
        logging.getLogger(name).removeHandler(handler)
