"""The bench=ruler config group: the YAML holds exactly RulerConfig's fields, and every task
the schema allows has a generator."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from omegaconf import OmegaConf

from memexp.benchmarks.ruler import Ruler
from memexp.benchmarks.ruler.tasks import TASKS
from memexp.benchmarks.ruler.templates import COMMON_WORDS, FREQ_WORDS, NIAH, QA, VARIABLE_TRACKING
from memexp.config import RULER_TASKS, RulerConfig

YAML = Path(__file__).resolve().parents[3] / "conf" / "bench" / "ruler.yaml"


def test_yaml_fields_are_the_schema_fields_with_its_defaults():
    node = OmegaConf.load(YAML)
    assert list(node.keys()) == [f.name for f in fields(RulerConfig)]
    assert OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(RulerConfig), node)) == RulerConfig()


def test_every_schema_task_has_a_generator():
    assert set(TASKS) == set(RULER_TASKS)


def test_generation_budgets_and_metrics():
    ruler = Ruler(RulerConfig())
    budgets = {t: ruler.max_new_tokens(t) for t in ("niah_single_1", "vt", "cwe", "fwe", "qa_1")}
    assert budgets == {"niah_single_1": 128, "vt": 30, "cwe": 120, "fwe": 50, "qa_1": 32}
    assert [NIAH.tokens_to_generate, VARIABLE_TRACKING.tokens_to_generate, COMMON_WORDS.tokens_to_generate,
            FREQ_WORDS.tokens_to_generate, QA.tokens_to_generate] == [128, 30, 120, 50, 32]
    assert Ruler(RulerConfig(max_new_tokens=20)).max_new_tokens("cwe") == 20
    assert {t: ruler.metric(t) for t in ("niah_multivalue", "vt", "qa_2")} == {
        "niah_multivalue": "string_match_all",
        "vt": "string_match_all",
        "qa_2": "string_match_part",
    }
