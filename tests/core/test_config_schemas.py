"""Every conf/ option names its schema and states only what differs from it; the composed run shows
every schema field (`--cfg=job`); the run folder of a config is what it was before the YAMLs were
stripped (users resume by it); validating a config imports no torch."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest
import yaml
from helpers.memexp_process import memexp, python
from omegaconf import OmegaConf

from memexp.core.compose import compose, group_options, load_config
from memexp.core.paths import CONF_DIR
from memexp.core.registry import BENCHES, METHODS
from memexp.core.schema import ASSETS_DIR, BackboneConfig, LoggerConfig
from memexp.run.records import run_folder


def schema_of(group: str, option: str) -> tuple[str, type]:
    """(defaults-list entry, dataclass) a conf/<group>/<option>.yaml must name."""
    if group in ("backbone", "logger"):
        return f"/schema/{group}@_here_", {"backbone": BackboneConfig, "logger": LoggerConfig}[group]
    registry = {"method": METHODS, "bench": BENCHES}[group]
    return f"/schema/{group}/{option}@_here_", registry.get(option).load_schema()


def default(f):
    return f.default_factory() if f.default_factory is not MISSING else f.default


OPTIONS = [(g, o) for g in ("backbone", "method", "bench", "logger") for o in group_options(g)
           if (CONF_DIR / g / f"{o}.yaml").is_file()]


@pytest.mark.parametrize("group,option", OPTIONS, ids=[f"{g}/{o}" for g, o in OPTIONS])
def test_each_option_names_its_schema_and_repeats_no_default(group, option):
    entry, schema = schema_of(group, option)
    node = OmegaConf.load(CONF_DIR / group / f"{option}.yaml")
    assert list(node.get("defaults", [])) == [entry, "_self_"]
    values = OmegaConf.to_container(node)
    values.pop("defaults")
    defaults = {f.name: default(f) for f in fields(schema)}
    # a backbone states its name and arch, its identity, even where they equal the schema's
    identity = {"name", "arch"} if group == "backbone" else set()
    repeated = [k for k, v in values.items() if k not in identity and v == defaults[k]]
    assert not repeated, f"{group}/{option}.yaml repeats the schema defaults of {repeated}"


def test_cfg_job_prints_every_schema_field_of_the_default_run():
    out = memexp("run", "--cfg=job", timeout=120)
    assert out.returncode == 0, out.stderr
    job = yaml.safe_load(out.stdout)
    for group, schema in (("backbone", BackboneConfig), ("method", METHODS.get("notebank").load_schema()),
                          ("bench", BENCHES.get("ruler").load_schema()), ("logger", LoggerConfig)):
        assert list(job[group]) == [f.name for f in fields(schema)], group
    # values: the default run (conf/config.yaml + the tiny_gdn_words override files): the native
    # router on the six NIAH tasks at the training length and 16x it, no read adapter (training-free)
    assert job["method"]["router"] == "native" and job["method"]["adapter"] is None
    assert job["method"]["layers"] == [0] and job["bench"]["lengths"] == [1024, 16384]
    assert len(job["bench"]["tasks"]) == 6 and job["bench"]["essay_standin"] is True
    assert job["backbone"]["pretrained"] == "${memexp_asset:tiny_gdn_words}" and job["logger"]["name"] == "none"


@pytest.mark.parametrize("group,registry", [("method", METHODS), ("bench", BENCHES)])
def test_every_method_and_bench_composes_with_every_field(group, registry):
    for entry in registry:
        node = compose(["backbone=tiny_gdn_random", f"{group}={entry.name}"])[group]
        assert list(node) == [f.name for f in fields(entry.load_schema())], entry.name


# asdict(RunConfig) hashed by memexp.run.records.run_folder (memexp.run.identity, identity_version 1: issue 19
# changed every key), with no hub snapshot cached (hub ids named by id + revision); tiny_gdn's asset path
# is replaced by its content fingerprint, so the key follows the weights, not the clone. Re-pinned when
# issues 13 and 15 landed with it (bench.shard, Plain/JRT rescale, RULER version 2, LongBench-v2 reserves).
FOLDERS = [
    (["backbone=tiny_gdn"], "ruler/tiny_gdn/notebank/16a1eda307"),
    (["backbone=mamba2"], "ruler/mamba2/notebank/60cd50fdb4"),
    (["backbone=tiny_gdn", "bench=longbench", "method=plain"], "longbench/tiny_gdn/plain/fecf8aa87a"),
    (["method=jrt", "bench=memoryagentbench", "backbone=qwen35_9b"], "memoryagentbench/qwen35_9b/jrt/9fffa619d7"),
]


@pytest.mark.parametrize("overrides,folder", FOLDERS, ids=[" ".join(o) or "default" for o, _ in FOLDERS])
def test_run_folders_are_unchanged(overrides, folder, tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    cfg = load_config(overrides)
    if cfg.backbone.name == "tiny_gdn":
        assert cfg.backbone.pretrained == str(ASSETS_DIR / "tiny_gdn")
        cfg.backbone.pretrained = "ASSET"
    assert run_folder(cfg).as_posix() == f"outputs/runs/{folder}"


def test_validating_every_method_and_bench_imports_no_torch():
    def backbone(registry, name):  # Titan and InfLLM convert a Llama's layers
        needs = set(registry.get(name).meta.get("requires", ()))
        return "tiny_llama_random" if needs & {"llama_layers", "softmax_attention"} else "tiny_gdn_random"

    names = [(g, n, backbone(r, n)) for g, r in (("method", METHODS), ("bench", BENCHES)) for n in r.names()]
    script = ("import sys; from memexp.core.compose import load_config\n"
              f"for group, name, backbone in {names!r}:\n"
              "    load_config([f'backbone={backbone}', f'{group}={name}'])\n"
              "assert 'torch' not in sys.modules, 'torch imported while validating'\n")
    out = python("-c", script, timeout=120)
    assert out.returncode == 0, out.stderr
