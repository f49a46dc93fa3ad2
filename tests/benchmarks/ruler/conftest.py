"""Fixtures of the RULER tests: a byte-level tokenizer, a small essay and tiny QA sets
written to a temporary folder, and `Ruler` with its cache there."""

from __future__ import annotations

import json

import pytest
from ruler_fixtures import ESSAY, SQUAD, ByteTokenizer, hotpotqa_rows

from memexp.benchmarks.ruler.benchmark import Ruler
from memexp.benchmarks.ruler.config import RulerConfig


@pytest.fixture
def tokenizer() -> ByteTokenizer:
    return ByteTokenizer()


@pytest.fixture
def essay_path(tmp_path) -> str:
    path = tmp_path / "essays.json"
    path.write_text(json.dumps({"text": ESSAY}))
    return str(path)


@pytest.fixture
def make_ruler(tmp_path, essay_path):
    def make(**fields) -> Ruler:
        fields.setdefault("essay_path", essay_path)
        fields.setdefault("cache_dir", str(tmp_path / "cache"))
        return Ruler(RulerConfig(**fields))

    return make


@pytest.fixture
def squad_path(tmp_path) -> str:
    path = tmp_path / "dev-v2.0.json"
    path.write_text(json.dumps(SQUAD))
    return str(path)


@pytest.fixture
def hotpotqa_path(tmp_path) -> str:
    path = tmp_path / "hotpot_dev_distractor_v1.json"
    path.write_text(json.dumps(hotpotqa_rows()))
    return str(path)
