"""Each architecture's costs module against independent counts.

The reference formulas below are the hand formulas memexp used before projection FLOPs were
counted from the models' Linear layers (memexp/costs/report.py and gdn2/model.py at commit d6708ed),
written over each architecture's config object: one 2 d_in d_out term per projection and MLP
matrix, by reading the layer definitions. The counted figures must equal them on every
architecture, at the paper's shapes and at odd ones.
"""

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from memexp.backbones import backbone_config, load_backbone
from memexp.backbones.attention.costs import kv_bytes_per_token
from memexp.backbones.attention.model import AttentionConfig, LlamaForCausalLM
from memexp.backbones.gdn import costs as gdn_costs
from memexp.backbones.gdn.model import GDNConfig, GDNForCausalLM
from memexp.backbones.gdn2 import costs as gdn2_costs
from memexp.backbones.gdn2.model import GDN2Config, GDN2ForCausalLM
from memexp.backbones.hybrid import costs as hybrid_costs
from memexp.backbones.hybrid.model import HybridConfig, Qwen35ForCausalLM
from memexp.backbones.mamba2 import costs as mamba2_costs
from memexp.backbones.mamba2.model import Mamba2Config, Mamba2ForCausalLM
from memexp.backbones.shapes import element_bytes, loaded_shapes, projection_flops, shapes_for
from memexp.benchmarks.ruler.config import RulerConfig
from memexp.core.registry import ARCHS, load_object
from memexp.core.schema import ConfigError, LoggerConfig, RunConfig
from memexp.methods.plain.config import PlainConfig

DATA = Path(__file__).parent / "data"


def fixture(name: str) -> dict:
    return json.loads((DATA / name / "config.json").read_text())


# The old hand formulas: (projections and MLP per token, conv + recurrence per token, LM head)


def old_gdn(c: GDNConfig) -> tuple[int, int, int]:
    outputs = 2 * c.key_dim + c.value_dim + 2 * c.v_heads + (c.value_dim if c.use_gate else 0)  # q k v a b (g)
    proj = 2 * c.hidden_size * outputs + 2 * c.value_dim * c.hidden_size + 6 * c.hidden_size * c.mlp_dim
    conv = 2 * c.conv_size * (2 * c.key_dim + c.value_dim) if c.use_short_conv else 0
    rec = c.v_heads * (7 * c.head_dim * c.head_v_dim + c.head_dim + 2 * c.head_v_dim)
    L = c.num_hidden_layers
    return L * proj, L * (conv + rec), 2 * c.hidden_size * c.vocab_size


def old_gdn2(c: GDN2Config) -> tuple[int, int, int]:
    D, r = c.hidden_size, c.head_v_dim  # f and g are low-rank: D -> r -> key_dim / value_dim
    proj = D * (3 * c.key_dim + 2 * c.value_dim) + D * r + r * c.key_dim + D * r + r * c.value_dim + c.value_dim * D
    per_layer = 2 * (proj + 3 * D * c.intermediate_size)
    terms = 2 * c.conv_size * (2 * c.key_dim + c.value_dim)
    terms += c.v_heads * (7 * c.head_dim * c.head_v_dim + 3 * c.head_dim + 3 * c.head_v_dim)
    L = c.num_hidden_layers
    return L * per_layer, L * terms, 2 * D * c.vocab_size


def old_mamba2(c: Mamba2Config) -> tuple[int, int, int]:
    heads = c.d_inner // c.head_dim
    in_proj = 2 * c.hidden_size * (2 * c.d_inner + 2 * c.n_groups * c.state_size + heads)
    out_proj = 2 * c.d_inner * c.hidden_size
    conv = 2 * c.conv_kernel * (c.d_inner + 2 * c.n_groups * c.state_size)
    rec = heads * (5 * c.head_dim * c.state_size + 3 * c.head_dim)
    L = c.num_hidden_layers
    return L * (in_proj + out_proj), L * (conv + rec), 2 * c.hidden_size * c.vocab_size


def old_attention(c: AttentionConfig) -> tuple[int, int, int]:
    q, kv = c.num_attention_heads * c.dim_per_head, c.kv_heads * c.dim_per_head
    per_layer = 2 * c.hidden_size * (q + 2 * kv) + 2 * q * c.hidden_size + 6 * c.hidden_size * c.intermediate_size
    return c.num_hidden_layers * per_layer, 0, 2 * c.hidden_size * c.vocab_size


def old_qwen35(c: HybridConfig) -> tuple[int, int, int]:
    h = c.hidden_size
    attn_layers = c.layer_types.count("full_attention")
    gdn_layers = len(c.layer_types) - attn_layers
    HV = c.linear_num_value_heads
    key_dim, value_dim = c.linear_num_key_heads * c.linear_key_head_dim, HV * c.linear_value_head_dim
    gdn = 2 * h * (2 * key_dim + value_dim + 2 * HV + value_dim) + 2 * value_dim * h  # qkv, z, b, a; out
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    attn = 2 * h * (2 * q + 2 * kv) + 2 * q * h  # q_proj doubled: query and output gate
    mlp = 6 * h * c.intermediate_size
    conv = 2 * c.linear_conv_kernel_dim * (2 * key_dim + value_dim)
    rec = HV * (7 * c.linear_key_head_dim * c.linear_value_head_dim + c.linear_key_head_dim
                + 2 * c.linear_value_head_dim)
    proj = gdn_layers * (gdn + mlp) + attn_layers * (attn + mlp)
    return proj, gdn_layers * (conv + rec), 2 * h * c.vocab_size


TINY_GDN = {"hidden_size": 64, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 32, "vocab_size": 258}
CASES = [  # (arch, config class, model class, old formula, config.json fields)
    ("gdn", GDNConfig, GDNForCausalLM, old_gdn, {"hidden_size": 2048, "num_hidden_layers": 24, "num_heads": 8,
                                                 "head_dim": 256, "expand_v": 1, "intermediate_size": 5632}),
    ("gdn", GDNConfig, GDNForCausalLM, old_gdn, TINY_GDN),
    ("gdn", GDNConfig, GDNForCausalLM, old_gdn, {**TINY_GDN, "use_gate": False, "use_short_conv": False,
                                                 "num_v_heads": 4, "hidden_ratio": 3}),
    ("gdn2", GDN2Config, GDN2ForCausalLM, old_gdn2, {}),  # the paper's 1.3B model
    ("gdn2", GDN2Config, GDN2ForCausalLM, old_gdn2, {**TINY_GDN, "intermediate_size": 128}),
    ("gdn2", GDN2Config, GDN2ForCausalLM, old_gdn2, {**TINY_GDN, "intermediate_size": 96, "expand_v": 2,
                                                     "num_v_heads": 4}),
    ("mamba2", Mamba2Config, Mamba2ForCausalLM, old_mamba2, {}),  # mamba2-1.3b
    ("mamba2", Mamba2Config, Mamba2ForCausalLM, old_mamba2, fixture("mamba2_8b")),
    ("mamba2", Mamba2Config, Mamba2ForCausalLM, old_mamba2, {"hidden_size": 64, "num_hidden_layers": 2,
                                                             "num_heads": 8, "head_dim": 16, "state_size": 16,
                                                             "n_groups": 2, "vocab_size": 258}),
    ("llama", AttentionConfig, LlamaForCausalLM, old_attention, fixture("llama32_1b")),
    ("llama", AttentionConfig, LlamaForCausalLM, old_attention, {"model_type": "transformer", "hidden_size": 256,
                                                                 "num_hidden_layers": 2, "num_heads": 4,
                                                                 "num_kv_heads": 2, "hidden_ratio": 4,
                                                                 "vocab_size": 500, "qkv_bias": True}),
    ("qwen35", HybridConfig, Qwen35ForCausalLM, old_qwen35, fixture("qwen35_9b")),
    ("qwen35", HybridConfig, Qwen35ForCausalLM, old_qwen35, {
        "vocab_size": 258, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "linear_key_head_dim": 16,
        "linear_value_head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4}),
]


@pytest.mark.parametrize("arch,config_class,model_class,old,fields", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_counted_projections_equal_the_old_hand_formulas(arch, config_class, model_class, old, fields):
    """Projection FLOPs counted from the meta-device model's Linear layers equal the old
    per-projection formulas, and f_phi / h_phi of the registered costs module equal the old
    totals (projections + conv + recurrence; LM head 2 D V)."""
    conf = config_class.from_dict(fields)
    proj, terms, lm_head = old(conf)
    assert projection_flops(model_class, conf) == (proj, lm_head)
    shapes = load_object(ARCHS.get(arch).meta["costs"])(conf, dtype_bytes=2)
    assert (shapes.flops_token, shapes.flops_lm_head) == (proj + terms, lm_head)


def test_one_layer_gdn_backbone_follows_app_c6():
    """Moved from tests/backbones/test_gdn_backbone.py: NoteBank App. C.6, the 24-layer model has
    f = 2.759e9 and h = 1.311e8 FLOPs per token; a loaded one-layer copy has 1/24 of f."""
    cfg = backbone_config({"name": "x", "arch": "gdn", "tokenizer": "byte", "model": {
        "hidden_size": 2048, "num_hidden_layers": 1, "num_heads": 8, "head_dim": 256, "expand_v": 1,
        "intermediate_size": 5632, "vocab_size": 32000}, "device": "cpu"})
    shapes = loaded_shapes(load_backbone(cfg), cfg)
    assert math.isclose(24 * shapes.flops_token, 2.759e9, rel_tol=2e-4)
    assert shapes.flops_lm_head == 2 * 2048 * 32000


TINY = ["tiny_gdn_random", "tiny_gdn2_random", "tiny_mamba2_random", "tiny_qwen35_random", "tiny_llama_random"]


@pytest.fixture(scope="module")
def tiny_backbones():
    return {name: (backbone_config(name), load_backbone(name)) for name in TINY}


@pytest.mark.parametrize("name", TINY)
def test_loaded_backbone_and_weightless_config_give_the_same_shapes(tiny_backbones, name):
    """The runner's shapes (the loaded backbone's config object) are `memexp cost`'s (the
    config parsed without weights); only where they came from differs."""
    cfg, backbone = tiny_backbones[name]
    loaded, offline = loaded_shapes(backbone, cfg), shapes_for(cfg)
    assert loaded.source == f"loaded backbone {name}" and offline.source.startswith("backbone.model")
    assert replace(loaded, source="") == replace(offline, source="")
    assert loaded.arch == cfg.arch and loaded.channels == len(backbone.channels)
    assert loaded.d_k == (backbone.channels[0].d_k if backbone.channels else 0)


STATE = {  # arch: (its costs module's state_bytes, the config field of the conv kernel width)
    "gdn": (gdn_costs.state_bytes, "conv_size"),
    "gdn2": (gdn2_costs.state_bytes, "conv_size"),
    "mamba2": (mamba2_costs.state_bytes, "conv_kernel"),
    "qwen35": (hybrid_costs.state_bytes, "linear_conv_kernel_dim"),
}


@pytest.mark.parametrize("name", TINY[:4])
def test_recurrent_state_bytes_are_what_a_state_holds(tiny_backbones, name):
    """Moved from the per-backbone tests: the costs module's recurrent + conv bytes, with
    memexp's kernel - 1 conv columns in the backbone's dtype, are the State's bytes; the
    accounting counts the full kernel (App. C.7's c_conv): one more column."""
    cfg, backbone = tiny_backbones[name]
    state_bytes, kernel_field = STATE[cfg.arch]
    kernel = getattr(backbone.config, kernel_field)
    eb = element_bytes(backbone.dtype)
    held = state_bytes(backbone.config, eb, kernel - 1)
    assert held["recurrent"] + held["conv"] == backbone.init_state().nbytes()
    shapes = loaded_shapes(backbone, cfg)  # bf16 conv windows, the paper's precision
    assert shapes.recurrent_bytes == held["recurrent"]
    assert shapes.conv_bytes == held["conv"] // ((kernel - 1) * eb) * kernel * shapes.dtype_bytes


@pytest.mark.parametrize("name", ["tiny_llama_random", "tiny_qwen35_random"])
def test_kv_bytes_per_token_are_what_the_cache_holds(tiny_backbones, name):
    """Moved from tests/backbones/test_attention.py (and extended to the hybrid): after 11
    tokens the attention layers' caches hold 11 x the per-token KV bytes."""
    cfg, backbone = tiny_backbones[name]
    state = backbone.init_state()
    empty = state.nbytes()
    backbone.forward(state, list(range(11)))
    c = backbone.config
    attn_layers = c.layer_types.count("full_attention") if cfg.arch == "qwen35" else c.num_hidden_layers
    kv_heads = c.num_key_value_heads if cfg.arch == "qwen35" else c.kv_heads
    head_dim = c.head_dim if cfg.arch == "qwen35" else c.dim_per_head
    eb = element_bytes(backbone.dtype)
    per_token = kv_bytes_per_token(attn_layers, kv_heads, head_dim, eb)
    assert state.nbytes() - empty == 11 * per_token
    shapes = loaded_shapes(backbone, cfg)  # bf16 KV caches, the paper's precision
    assert shapes.kv_bytes_per_token == per_token // eb * shapes.dtype_bytes


def test_an_architecture_without_a_cost_model_is_named(monkeypatch):
    """An architecture registered without `costs` (as an outside package may) gets a one-line
    error naming it from `memexp cost`, and every record of a run stores that error."""
    from memexp.run.runner import record_costs_fn

    monkeypatch.delitem(ARCHS.get("gdn").meta, "costs")
    message = "backbone.arch='gdn': no cost model registered (ARCHS.register(..., costs='package.module:function'))"
    cfg = backbone_config("tiny_gdn_random")
    with pytest.raises(ConfigError) as e:
        shapes_for(cfg)
    assert str(e.value) == message
    run_cfg = RunConfig(backbone=cfg, method=PlainConfig(), bench=RulerConfig(), logger=LoggerConfig())
    record_costs = record_costs_fn(run_cfg, load_backbone(cfg))
    assert record_costs({"context": 10}, {}) == {"error": f"ConfigError: {message}"}
