"""The tiny_gdn_lengths preset through `python -m memexp run`: a short run on every push, the
README's claims in the slow run. The two share their runs when both are selected."""

import pytest
from helpers.memexp_process import first_examples, mean_score, records, run_presets, selected, summary

README_SAMPLES, SHORT_SAMPLES = 50, 8
LENGTHS = (1024, 16384)


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory) -> dict:
    """Plain and NoteBank-TF on the preset at 1K and 16K, once for this file: the README's 50 samples
    when the slow test is selected (the short comparison's 8 are their first 8), the short
    comparison's 8 otherwise. {method: run folder}."""
    samples = README_SAMPLES if selected(request, "test_the_readme_claims_hold") else SHORT_SAMPLES
    jobs = ("bench.lengths=[1024,16384]", f"bench.num_samples={samples}")
    return run_presets(tmp_path_factory.mktemp("tiny_gdn"), "tiny_gdn_lengths",
                       {"plain": ("plain", *jobs), "notebank": ("notebank", *jobs)}, timeout=900)


def scores(folder, samples: int) -> dict[int, float]:
    """niah_single_1's mean score per length over the preset's first `samples` examples."""
    return {length: mean_score(first_examples(records(folder), "niah_single_1", length, samples)) for length in LENGTHS}


def test_short_comparison_plain_and_notebank(runs):
    plain, notebank = scores(runs["plain"], SHORT_SAMPLES), scores(runs["notebank"], SHORT_SAMPLES)
    assert plain[1024] >= 75
    assert notebank[16384] >= plain[16384] + 40


@pytest.mark.slow
def test_the_readme_claims_hold(runs):
    """The preset's 50 samples at the two lengths the claims name (a RULER example is a function of
    its task, length, seed and index, so the other lengths of the table change none of these)."""
    plain, notebank = scores(runs["plain"], README_SAMPLES), scores(runs["notebank"], README_SAMPLES)
    assert summary(runs["plain"])["num_questions"] == 2 * README_SAMPLES
    assert plain[1024] >= 90
    assert plain[16384] <= 50
    assert notebank[16384] >= plain[16384] + 40
