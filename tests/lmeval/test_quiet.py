"""`memexp lm-eval` offline prints its results without noise (memexp.lmeval.quiet): no nltk
download error, no transformers model-type warning, no `fatal: not a git repository`, no `-1`
row for a length the run did not ask for; and the punkt_tab memexp writes splits as nltk's own
punkt_tab does (the `punkt` package's port, memexp.benchmarks.ruler.sentences)."""

from __future__ import annotations

import pytest
from helpers.memexp_process import memexp

pytest.importorskip("lm_eval")


def test_the_written_punkt_tab_splits_as_memexps_punkt(tmp_path, monkeypatch):
    import nltk

    from memexp.benchmarks.ruler.sentences import split_sentences
    from memexp.lmeval.quiet import punkt_tab

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty")])
    monkeypatch.setattr(nltk, "download", lambda *a, **k: pytest.fail("nltk.download was called"))
    folder = punkt_tab(tmp_path / "nltk_data")
    assert folder is not None and (folder / "ortho_context.tab").is_file()
    text = ("Dr. Smith went to Washington on Jan. 5th. He met Mrs. Jones at 3 p.m. and they talked. "
            "Was it worth it? Yes! The U.S. economy grew by 2.5 per cent. in that year, e.g. in farming.")
    assert nltk.sent_tokenize(text) == split_sentences(text)
    assert len(split_sentences(text)) >= 4
    assert punkt_tab(tmp_path / "elsewhere") is None  # nltk finds it now: nothing written again


def test_an_offline_lm_eval_run_prints_only_its_results(tmp_path):
    env = {"MEMEXP_ROOT": str(tmp_path), "NLTK_DATA": str(tmp_path / "no_nltk_data")}
    out = memexp("lm-eval", "--model_args", "backbone=tiny_gdn,method=plain", "--tasks", "niah_single_1", "--metadata",
                 '{"max_seq_lengths":[1024]}', "--limit", "1", "--device", "cpu", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    printed = out.stdout + out.stderr
    for noise in ("nltk_data", "Downloaded punkt_tab", "You are using a model of type", "fatal:", "| -1|"):
        assert noise not in printed, noise
    assert "|niah_single_1|" in out.stdout and "|  1024|" in out.stdout
    assert not [line for line in out.stdout.splitlines() if "4096" in line]
