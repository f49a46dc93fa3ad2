"""Third-party loggers stay off the progress bar: a NoteBank run with the BM25 router prints no
bm25s debug line per question, even under a logging config that has a root handler (Hydra's
default job logging), while memexp's own messages still come through."""

from __future__ import annotations

import json
import logging

from helpers.memexp_process import memexp


def test_importing_the_router_quiets_bm25s_but_not_its_warnings_or_memexp(caplog):
    import bm25s

    import memexp.methods.notebank.router  # noqa: F401

    with caplog.at_level(logging.DEBUG):
        corpus = bm25s.tokenize(["a cat sat", "a dog ran"], stopwords="en", show_progress=False)
        bm25s.BM25().index(corpus, show_progress=False)
        logging.getLogger("bm25s").warning("a real problem")
        logging.getLogger("memexp.cli.data").warning("memexp's own message")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("bm25s", "a real problem"), ("memexp.cli.data", "memexp's own message")]


def test_a_bm25_notebank_run_prints_no_bm25s_lines(tmp_path):
    out = tmp_path / "runs"
    args = ["run", "backbone=tiny_gdn_random", "method=notebank",
           "method.router=bm25", "method.chunk_size=128", "bench=ruler", "bench.num_samples=2", "bench.lengths=[700]",
           "bench.max_new_tokens=4", f"bench.cache_dir={tmp_path / 'cache'}", f"output_dir={out}", "logger=none",
           "hydra/job_logging=default"]  # a root handler, as Hydra's default logging or a launcher sets up
    result = memexp(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (records,) = out.glob("*/*/*/*/records.jsonl")
    notes = [json.loads(line)["method_stats"]["notes"] for line in records.read_text().splitlines()]
    assert len(notes) == 2 and min(notes) > 0  # the BM25 index was built for every question
    printed = result.stdout + result.stderr
    assert "bm25s" not in printed and "Building index" not in printed
    assert "[memexp] run folder:" in result.stderr
