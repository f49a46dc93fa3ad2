"""The tiny_gdn_words_lengths preset through `python -m memexp run`: a short Plain / NoteBank-TF
run on every push, the README's six-task figures in the slow run."""

import pytest
from preset_run import records, run_preset, summary

PRESET = "tiny_gdn_words_lengths"


def mean_at(run_summary: dict, length: int) -> float:
    per_task = [scores[str(length)] for scores in run_summary["scores"].values()]
    return sum(per_task) / len(per_task)


def test_short_comparison_plain_and_notebank(tmp_path):
    # at 16x the training length Plain has forgotten the needle (0 of 10 on seed 42 in the README
    # table) and NoteBank-TF's native router brings it back (9 of 10): 3 examples must show it
    short = ("bench.tasks=[niah_single_1]", "bench.lengths=[16384]", "bench.num_samples=3")
    plain = summary(run_preset(tmp_path / "plain", PRESET, "plain", *short))
    notebank_run = run_preset(tmp_path / "notebank", PRESET, "notebank", *short)
    assert mean_at(summary(notebank_run), 16384) > mean_at(plain, 16384)
    for record in records(notebank_run):
        assert record["method_stats"]["router"] == "native" and record["method_stats"]["selected"]


@pytest.mark.slow
def test_the_readme_six_task_figures(tmp_path):
    lengths = "bench.lengths=[1024,16384]"
    plain = summary(run_preset(tmp_path / "plain", PRESET, "plain", lengths, "bench.num_samples=5"))
    notebank = summary(run_preset(tmp_path / "notebank", PRESET, "notebank", lengths, "bench.num_samples=5"))
    assert mean_at(notebank, 16384) >= mean_at(plain, 16384) + 10  # README: 26.7 vs 3.3 on 10 examples
    assert set(plain["scores"]) == {"niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
                                    "niah_multiquery", "niah_multivalue"}
