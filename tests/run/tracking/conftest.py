"""The offline W&B run the tests in this folder read back (tests/run/tracking/offline_run.py says how).

NoteBank on the tiny random GDN, RULER niah_single_1 at two lengths x 2 samples = 4 examples. The
first process stops after 2 (`max_examples=2`, the same run folder: max_examples is not part of the
config hash), the second resumes the other 2 under the same W&B id. Each process writes its own
offline-run folder; the second's is the one `wandb sync` uploads last. A random model scores 0 on
RULER, so the benchmark's score is replaced by a fixed function of the question id (distinct per
question, different means per length).
"""

import time

import pytest
from offline_run import offline_runs

from memexp.benchmarks.ruler.benchmark import Ruler
from memexp.core.compose import load_config
from memexp.run.runner import run

LENGTHS = (512, 640)
ARGS = ["backbone=tiny_gdn_random", "method=notebank", "method.chunk_size=128", "bench=ruler",
        "bench.tasks=[niah_single_1]", f"bench.lengths=[{','.join(map(str, LENGTHS))}]", "bench.num_samples=2",
        "bench.max_new_tokens=8", "progress=false", "logger=wandb", "threads=1"]


def _offline(mp: pytest.MonkeyPatch, tmp) -> None:
    for key, value in dict(WANDB_MODE="offline", WANDB_DIR=tmp, WANDB_DATA_DIR=tmp / "data",
                           WANDB_CACHE_DIR=tmp / "cache", WANDB_CONFIG_DIR=tmp / "config").items():
        mp.setenv(key, str(value))
    mp.setattr(Ruler, "score", lambda self, prediction, q: float(sum(map(ord, q.id)) % 97))


@pytest.fixture(scope="session")
def resumed(tmp_path_factory):
    """(run folder, [first process's offline run, second's]) after a stop after 2 of 4 examples and a resume."""
    tmp = tmp_path_factory.mktemp("wandb")
    with pytest.MonkeyPatch.context() as mp:
        _offline(mp, tmp)
        first = run(load_config([*ARGS, f"output_dir={tmp / 'runs'}", "max_examples=2"]), labels=["chunk_size=128"])
        assert first["num_questions"] == 2
        time.sleep(1.1)  # offline-run folders are named to the second: keep the two processes' apart
        second = run(load_config([*ARGS, f"output_dir={tmp / 'runs'}"]), labels=["chunk_size=128"])
        assert second["num_questions"] == 4
    (folder,) = [p.parent for p in (tmp / "runs").rglob("config.yaml")]
    runs = offline_runs(folder / "wandb")
    assert len(runs) == 2 and runs[0].run_id == runs[1].run_id == (folder / "wandb_id.txt").read_text().strip()
    return folder, runs


@pytest.fixture(scope="session")
def repeated(tmp_path_factory):
    """(run folder, every offline run) after three identical commands: the first runs all 4
    examples, the other two find every question recorded."""
    tmp = tmp_path_factory.mktemp("wandb_repeat")
    with pytest.MonkeyPatch.context() as mp:
        _offline(mp, tmp)
        for _ in range(3):
            assert run(load_config([*ARGS, f"output_dir={tmp / 'runs'}"]))["num_questions"] == 4
            time.sleep(1.1)
    (folder,) = [p.parent for p in (tmp / "runs").rglob("config.yaml")]
    return folder, offline_runs(folder / "wandb")


