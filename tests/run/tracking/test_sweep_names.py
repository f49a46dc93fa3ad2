"""A multirun sweep through `python -m memexp run -m`: every job is one W&B run in the sweep's group,
named by bench / backbone / method and the swept field only, tagged with it; also when the jobs
share their reads and so log from one process at once (memexp.run.groups)."""

from helpers.memexp_process import memexp
from offline_run import offline_runs


def test_a_sweep_is_one_group_of_runs_named_by_the_swept_field(tmp_path):
    env = dict(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_DATA_DIR=str(tmp_path / "data"),
               WANDB_CACHE_DIR=str(tmp_path / "cache"), WANDB_CONFIG_DIR=str(tmp_path / "config"))
    sweep = tmp_path / "sweep"
    out = memexp("run", "-m", "backbone=tiny_gdn_random", "method=notebank", "method.chunk_size=128",
                 "method.replay_budget=1,2", "bench=ruler", "bench.tasks=[niah_single_1]", "bench.lengths=[512]",
                 "bench.num_samples=2", "bench.max_new_tokens=4", "progress=false", "logger=wandb",
                 f"output_dir={tmp_path / 'runs'}", f"hydra.sweep.dir={sweep}", env=env)
    assert out.returncode == 0, out.stderr
    assert "2 jobs launched as 1:" in out.stderr  # R only answers: one process logs both runs at once
    runs = offline_runs(tmp_path / "runs")
    assert sorted(r.name for r in runs) == ["ruler | tiny_gdn_random | notebank | replay_budget=1",
                                            "ruler | tiny_gdn_random | notebank | replay_budget=2"]
    assert {r.group for r in runs} == {sweep.name}
    assert {t for r in runs for t in r.tags if t.startswith("replay_budget=")} == {"replay_budget=1",
                                                                                   "replay_budget=2"}
    assert "chunk_size=128" not in runs[0].tags  # constant across the sweep: shared, not a label
    for run in runs:  # each run holds its own job's config and progress
        assert run.config["method"]["replay_budget"] == int(run.name[-1])
        assert [row["progress/questions"] for row in run.history if "progress/questions" in row] == [1, 2]
