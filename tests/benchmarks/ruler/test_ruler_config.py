"""The bench=ruler config group: the YAML names RulerConfig and composes to its defaults, and the
schema allows exactly the tasks of the generator's task table."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from memexp.benchmarks.ruler.benchmark import Ruler
from memexp.benchmarks.ruler.config import RulerConfig
from memexp.benchmarks.ruler.tasks import TASKS
from memexp.benchmarks.ruler.templates import COMMON_WORDS, FREQ_WORDS, NIAH, QA, VARIABLE_TRACKING
from memexp.core.compose import load_config
from memexp.core.schema import ConfigError

YAML = Path(__file__).resolve().parents[3] / "conf" / "bench" / "ruler.yaml"


def test_yaml_names_the_schema_and_composes_to_its_defaults():
    node = OmegaConf.load(YAML)
    assert list(node.defaults) == ["/schema/bench/ruler@_here_", "_self_"]
    # a backbone without a bench_for_backbone/ruler_<backbone>.yaml gets the schema's defaults
    assert load_config(["bench=ruler", "backbone=tiny_gdn_random"]).bench == RulerConfig()


def test_the_schema_allows_exactly_the_task_table():
    assert RulerConfig(tasks=list(TASKS)).tasks == list(TASKS)
    with pytest.raises(ConfigError, match="bench.tasks='niah_single_4'"):
        RulerConfig(tasks=["niah_single_4"])


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
