"""Repeating a finished run logs nothing new to W&B, and a resumed run continues its W&B run's
steps (read back from the offline .wandb files, tests/run/tracking/offline_run.py)."""


def test_repeating_a_complete_run_logs_nothing_new(repeated):
    folder, runs = repeated
    assert len(runs) == 1  # the second and third commands added no record: no offline run of their own
    (only,) = runs
    assert len([h for h in only.history if "length" in h]) == 2  # each length's point once
    assert len([h for h in only.history if "ruler/records/path" in h]) == 1  # the table once


def test_a_resumed_run_continues_the_steps_of_its_first_process(resumed):
    _, (first, second) = resumed
    steps_first = [h["_step"] for h in first.history]
    steps_second = [h["_step"] for h in second.history]
    assert steps_first and steps_second
    assert min(steps_second) > max(steps_first)  # synced in order, the second's rows follow the first's
    assert steps_first == sorted(steps_first) and steps_second == sorted(steps_second)
