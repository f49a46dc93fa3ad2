"""`hf_cache`: an empty Hugging Face hub cache in a temporary folder, chosen by HF_HOME and
HF_HUB_CACHE as a user would, with HF_HUB_OFFLINE=1 (cache only)."""

from __future__ import annotations

import pytest


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    home = tmp_path / "hf"
    cache = home / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    # huggingface_hub reads these once, when first imported; a fresh process reads the env above
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache
