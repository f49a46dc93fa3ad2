"""The tiny_gdn_words_lengths preset through `python -m memexp run`: a short Plain / NoteBank-TF
run on every push, the README's six-task figures in the slow run."""

import pytest
from helpers.memexp_process import records, run_presets, summary

PRESET = "tiny_gdn_words_lengths"


def mean_at(run_summary: dict, length: int) -> float:
    per_task = [scores[str(length)] for scores in run_summary["scores"].values()]
    return sum(per_task) / len(per_task)


def test_short_comparison_plain_and_notebank(tmp_path):
    # at 16x the training length Plain has mostly forgotten the needle (2 of 10 on seed 42 in the
    # README table) and NoteBank-TF's native router brings it back (10 of 10): 3 examples must show it
    short = ("bench.tasks=[niah_single_1]", "bench.lengths=[16384]", "bench.num_samples=3")
    runs = run_presets(tmp_path, PRESET, {"plain": ("plain", *short), "notebank": ("notebank", *short)})
    plain, notebank_run = summary(runs["plain"]), runs["notebank"]
    assert mean_at(summary(notebank_run), 16384) > mean_at(plain, 16384)
    for record in records(notebank_run):
        assert record["method_stats"]["router"] == "native" and record["method_stats"]["selected"]


@pytest.mark.slow
def test_the_readme_six_task_figures(tmp_path):
    """README, 10 examples per task on seeds 42 / 9090: at 16K native routing is 44.6 / 43.3 points
    above Plain and 17.9 / 11.7 below the oracle; at 1K Plain answers single_1, single_2 (100 / 100)
    and multiquery (90 / 90). On seed 42's first 5 per task (63.3 native, 15.8 Plain, 85.0 oracle):
    a margin of 30 over Plain and a gap of at most 25 to the oracle."""
    lengths = ("bench.lengths=[1024,16384]", "bench.num_samples=5")
    runs = run_presets(tmp_path, PRESET, {
        "plain": ("plain", *lengths), "notebank": ("notebank", *lengths),
        "oracle": ("notebank", "method.router=oracle", "bench.lengths=[16384]", "bench.num_samples=5")})
    plain, notebank, oracle = (summary(runs[name]) for name in ("plain", "notebank", "oracle"))
    assert mean_at(notebank, 16384) >= mean_at(plain, 16384) + 30, (mean_at(notebank, 16384), mean_at(plain, 16384))
    assert mean_at(oracle, 16384) - mean_at(notebank, 16384) <= 25, (mean_at(oracle, 16384), mean_at(notebank, 16384))
    assert set(plain["scores"]) == {"niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
                                    "niah_multiquery", "niah_multivalue"}
    for task in ("niah_single_1", "niah_single_2", "niah_multiquery"):
        assert plain["scores"][task]["1024"] >= 90, (task, plain["scores"][task])
