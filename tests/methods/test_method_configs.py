"""conf/method/*.yaml and the NoteBank per-backbone overrides fill the typed schemas."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from memexp.core.registry import METHODS
from memexp.core.schema import _build
from memexp.methods.notebank.config import NoteBankConfig

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.mark.parametrize("name", ["plain", "jrt", "notebank", "clean_start"])
def test_method_yaml_validates(name):
    node = OmegaConf.load(CONF / "method" / f"{name}.yaml")
    assert list(node.defaults) == [f"/schema/method/{name}@_here_", "_self_"]  # it names its schema
    cfg = _build(METHODS.get(name).load_schema(), node, "method")
    assert cfg.name == name


def test_notebank_yaml_holds_the_papers_gdn_defaults():
    cfg = _build(NoteBankConfig, OmegaConf.load(CONF / "method" / "notebank.yaml"), "method")
    assert (cfg.chunk_size, cfg.write_budget, cfg.span_budget, cfg.window, cfg.tail, cfg.address_dim) == (
        512, 2, 64, 48, 32, 16)
    assert cfg.rescale is None and cfg.router == "native"


@pytest.mark.parametrize("backbone", ["mamba2", "mamba2_8b"])
def test_mamba2_overrides_chunk_size_and_resets_the_state(backbone):
    path = CONF / "method_for_backbone" / f"notebank_{backbone}.yaml"
    assert path.read_text().splitlines()[0] == "# @package method"
    merged = OmegaConf.merge(OmegaConf.load(CONF / "method" / "notebank.yaml"), OmegaConf.load(path))
    cfg = _build(NoteBankConfig, merged, "method")
    assert cfg.chunk_size == 256 and cfg.rescale == 0.0 and cfg.span_budget == 64


def test_hydra_composes_the_backbone_override_into_the_method_group():
    from hydra import compose, initialize_config_dir

    from memexp.core.schema import store_schemas

    store_schemas()  # the YAMLs name their schemas in Hydra's ConfigStore
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("config", overrides=["method=notebank", "method_for_backbone=notebank_mamba2"])
    method = _build(NoteBankConfig, cfg.method, "method")
    assert method.chunk_size == 256 and method.rescale == 0.0 and method.window == 48
