"""Every test runs offline, single-threaded and without W&B network traffic."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

TESTS = Path(__file__).resolve().parent
# test folders whose conftest.py builds a session-scoped fixture their files share
SESSION_FOLDERS = ("cluster", "run/tracking")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """For pytest-xdist's `--dist loadgroup` (`make test`): a file's tests run on one worker, so a
    module-scoped fixture (a trained tiny model, a converted checkpoint) is built once; a folder
    whose conftest holds a session fixture (tests/cluster's SLURM cluster, tests/run/tracking's offline
    runs) is one group, so that fixture is built once too. Under xdist, files with a test marked
    slow come first (`--no-loadscope-reorder` keeps this order), so that no long file starts last
    while the other workers sit idle. Without xdist the marks do nothing and the order is pytest's."""
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts
        folder = next((f for f in SESSION_FOLDERS if "/".join(parts).startswith(f + "/")), None)
        item.add_marker(pytest.mark.xdist_group(folder or "/".join(parts)))
    if hasattr(config, "workerinput"):
        slow_files = {item.path for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: item.path not in slow_files)  # stable: pytest's order otherwise
