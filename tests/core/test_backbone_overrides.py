"""conf/method_for_backbone/<method>_<backbone>.yaml and conf/bench_for_backbone/<bench>_<backbone>.yaml
are picked by the composition the CLI uses (memexp.core.compose.load_config) from the backbone and method /
bench chosen, and only then; a backbone without such a file gets the schema's defaults."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from memexp.benchmarks.longbench.config import LongBenchConfig
from memexp.benchmarks.ruler.config import RulerConfig
from memexp.core.compose import group_options, load_config
from memexp.core.paths import CONF_DIR
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.plain.config import PlainConfig


def overrides(group: str) -> list[tuple[str, str, str]]:
    """(file stem, option, backbone) of every <option>_<backbone>.yaml in conf/<group>_for_backbone."""
    axis = group.split("_")[0]
    found = []
    for path in sorted((CONF_DIR / group).glob("*.yaml")):
        option = next(o for o in group_options(axis) if path.stem.startswith(o + "_"))
        found.append((path.stem, option, path.stem[len(option) + 1:]))
    return found


OVERRIDES = [("method_for_backbone", *o) for o in overrides("method_for_backbone")] + \
            [("bench_for_backbone", *o) for o in overrides("bench_for_backbone")]


def test_the_files_the_brief_relies_on_exist():
    assert {(g, s) for g, s, _, _ in OVERRIDES} >= {("bench_for_backbone", "ruler_tiny_gdn"),
                                                    ("method_for_backbone", "notebank_tiny_gdn"),
                                                    ("method_for_backbone", "notebank_mamba2")}


@pytest.mark.parametrize("group,stem,option,backbone", OVERRIDES, ids=[f"{g}/{s}" for g, s, _, _ in OVERRIDES])
def test_every_override_file_is_picked_for_its_backbone(group, stem, option, backbone, tmp_path):
    axis = group.split("_")[0]
    values = OmegaConf.to_container(OmegaConf.load(CONF_DIR / group / f"{stem}.yaml"))
    cfg = load_config([f"backbone={backbone}", f"{axis}={option}", f"backbone.pretrained={tmp_path}"])
    picked = getattr(cfg, axis)
    plain = type(picked)()
    for key, value in values.items():
        assert value != getattr(plain, key), f"{stem}.yaml: {key} repeats the schema default"
        assert getattr(picked, key) == value, f"{stem}.yaml: {key} not applied"


def test_the_default_run_is_training_free_notebank_on_tiny_gdn_words():
    cfg = load_config([])  # the quick start: `python -m memexp run`
    assert (cfg.backbone.name, cfg.method.name, cfg.bench.name) == ("tiny_gdn_words", "notebank", "ruler")
    # conf/method_for_backbone/notebank_tiny_gdn_words.yaml: the native router, no read adapter
    assert cfg.method == NoteBankConfig(rescale=0.0, layers=[0], address_dim=None, replay_budget=4)
    assert cfg.bench.lengths == [1024, 16384] and cfg.bench.num_samples == 4 and cfg.bench.essay_standin


def test_tiny_gdn_gets_its_own_ruler_scale_and_the_bm25_router():
    cfg = load_config(["backbone=tiny_gdn"])  # method=notebank bench=ruler, as in the default run
    # conf/bench_for_backbone/ruler_tiny_gdn.yaml and conf/method_for_backbone/notebank_tiny_gdn.yaml
    assert cfg.bench == RulerConfig(lengths=[1024, 4096, 16384], num_samples=50)
    assert cfg.method == NoteBankConfig(router="bm25", note_separator=" ", replay_suffix=" ")


def test_mamba2_gets_its_notebank_chunks_and_state_reset_and_ruler_defaults():
    cfg = load_config(["backbone=mamba2", "method=notebank", "bench=ruler"])
    assert cfg.method == NoteBankConfig(chunk_size=256, rescale=0.0)  # notebank_mamba2.yaml
    assert cfg.bench == RulerConfig()  # no ruler_mamba2.yaml


def test_a_backbone_without_override_files_gets_the_plain_defaults():
    cfg = load_config(["backbone=tiny_gdn_random", "method=notebank", "bench=ruler"])
    assert cfg.method == NoteBankConfig() and cfg.bench == RulerConfig()


def test_an_override_applies_only_to_its_own_method_and_bench():
    cfg = load_config(["backbone=tiny_gdn", "method=plain", "bench=longbench"])
    assert cfg.method == PlainConfig() and cfg.bench == LongBenchConfig()
    cfg = load_config(["backbone=mamba2", "method=plain"])
    assert cfg.method == PlainConfig()


def test_a_command_line_value_beats_the_override_file():
    cfg = load_config(["backbone=mamba2", "method=notebank", "method.chunk_size=128", "bench.num_samples=3"])
    assert cfg.method.chunk_size == 128 and cfg.method.rescale == 0.0 and cfg.bench.num_samples == 3
    cfg = load_config(["backbone=tiny_gdn", "bench.lengths=[2048]", "method.router=native"])
    assert cfg.bench.lengths == [2048] and cfg.bench.num_samples == 50 and cfg.method.router == "native"
