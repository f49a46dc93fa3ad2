"""Titan-Llama's analytical costs (memexp.costs.report.titan_costs) against counts made independently: the
matmul FLOPs torch's FlopCounterMode sees in one memory call, the bytes a real state holds after
a forward, and (query, key) pairs counted one query at a time."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from memexp.backbones import load_backbone
from memexp.core.compose import load_config
from memexp.costs.report import cost_report, format_cost_table, key_pairs
from memexp.methods.titan.config import TitanConfig
from memexp.methods.titan.costs import segment_pairs, titan_costs
from memexp.methods.titan.retrofit import retrofit


def test_segment_pairs_count_each_querys_keys():
    for count, w in [(1, 4), (4, 4), (5, 4), (37, 8), (64, 16)]:
        assert segment_pairs(count, w) == sum(p - w * (p // w) + 1 for p in range(count))


@pytest.mark.parametrize("tokens", [48, 80])
def test_read_write_and_rate_flops_match_the_memorys_matmuls(tokens):
    bb = load_backbone("tiny_llama_random")  # H 4, Hkv 2, d 16, D 64
    cfg = TitanConfig(layers=2, segment_length=16, test_batch=32)
    memory = retrofit(bb, cfg).layers["0"].memory
    q, k, v = torch.randn(1, tokens, 4, 16), torch.randn(1, tokens, 2, 16), torch.randn(1, tokens, 2, 16)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        memory(q, k, v, memory.init_state(1, torch.device("cpu")), 0)
    flops = titan_costs(bb.config, cfg, tokens, 4)["flops"]
    per_layer = (flops["read"] + flops["write"] + flops["rates"]) / 2  # two memory layers
    assert per_layer == counter.get_total_flops()


@pytest.mark.parametrize("layers, local, tokens", [(2, False, 50), (1, False, 50), (1, True, 37), (1, False, 8)])
def test_state_bytes_match_a_real_state(layers, local, tokens):
    bb = load_backbone({"name": "t", "arch": "llama", "tokenizer": "byte", "dtype": "float32", "model": {
        "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": 258}})
    cfg = TitanConfig(layers=layers, segment_length=16, test_batch=32, local_later_layers=local)
    retrofit(bb, cfg)
    state = bb.init_state()
    bb.forward(state, list(range(tokens)))
    assert titan_costs(bb.config, cfg, tokens, 4)["state_bytes"]["total"] == state.nbytes()


def test_converted_layers_save_the_attention_beyond_their_segment():
    bb = load_backbone("tiny_llama_random")
    cfg = TitanConfig(layers=1, segment_length=16, test_batch=32)
    saved = -titan_costs(bb.config, cfg, 100, 4)["flops"]["attention_saved"]
    assert saved == 4 * 4 * 16 * sum(p + 1 - (p - 16 * (p // 16) + 1) for p in range(100))  # 4 H d per pair
    assert key_pairs(0, 100) == 5050


def test_memexp_cost_reports_titan(tmp_path):
    cfg = load_config(["backbone=tiny_llama_random", "method=titan", "method.layers=2", "method.segment_length=16",
                       "method.test_batch=32", "bench=ruler"])
    report = cost_report(cfg, 1000, question_tokens=10, output_tokens=5)
    assert report["titan"]["flops"]["total"] == titan_costs(load_backbone("tiny_llama_random").config, cfg.method,
                                                            1014, report["backbone"]["dtype_bytes"])["flops"]["total"]
    assert "Titan state: memory_weights" in format_cost_table(report)
