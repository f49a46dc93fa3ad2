"""The tiny_gdn_lengths preset through `python -m memexp run`: a short run on every push, the
README's claims in the slow run."""

import pytest
from helpers.memexp_process import run_presets, summary


def scores(out, **jobs: tuple[str, ...]) -> dict[str, dict[int, float]]:
    """niah_single_1's score per length of each job (method, *overrides) of the preset, run at once."""
    runs = run_presets(out, "tiny_gdn_lengths", jobs, timeout=900)
    return {name: {int(k): v for k, v in summary(folder)["scores"]["niah_single_1"].items()}
            for name, folder in runs.items()}


def test_short_comparison_plain_and_notebank(tmp_path):
    short = ("bench.lengths=[1024,16384]", "bench.num_samples=8")
    plain, notebank = scores(tmp_path, plain=("plain", *short), notebank=("notebank", *short)).values()
    assert plain[1024] >= 75
    assert notebank[16384] >= plain[16384] + 40


@pytest.mark.slow
def test_the_readme_claims_hold(tmp_path):
    """The preset's 50 samples at the two lengths the claims name (a RULER example is a function of
    its task, length, seed and index, so the other lengths of the table change none of these)."""
    both = ("bench.lengths=[1024,16384]",)
    plain, notebank = scores(tmp_path, plain=("plain", *both), notebank=("notebank", *both)).values()
    assert plain[1024] >= 90
    assert plain[16384] <= 50
    assert notebank[16384] >= plain[16384] + 40
