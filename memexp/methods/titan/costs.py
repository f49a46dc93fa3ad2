"""Titan-Llama's analytical costs (Pan & Behrouz): the memory's FLOPs and state bytes beside full
attention. Registered as Titan's `costs` (memexp.costs.method); the cost report shows them as its
`titan` section."""

from __future__ import annotations

from typing import Any

from memexp.core.schema import RunConfig
from memexp.costs.method import Counts, MethodCosts
from memexp.costs.report import format_bytes, format_flops, key_pairs


def segment_pairs(count: int, segment: int) -> int:
    """(query, key) pairs when `count` tokens from position 0 attend within absolute segments of
    `segment` tokens: the token at p sees p - segment * floor(p / segment) + 1 keys."""
    full, rest = divmod(count, segment)
    return full * segment * (segment + 1) // 2 + rest * (rest + 1) // 2


def titan_costs(conf, titan, tokens: int, dtype_bytes: int) -> dict[str, Any]:
    """FLOPs and state bytes Titan adds to (or saves from) full attention over `tokens` positions
    (context, question and generated), for an attention config `conf` (H query heads, Hkv KV heads,
    head size d, hidden D) and a TitanConfig (k converted layers, segment W).

    Per memory layer: read 3 x 2 d^2 per query head and token (M(q), three d x d products); gate
    2 D H d per token; theta 2 Hkv d Hkv per token, eta and alpha 2 x 2 Hkv d Hkv per complete
    chunk; inner gradient 16 d^2 per KV head and written token (forward 3 x 2 d^2, backward
    3 x 2 d^2 for the weight gradients and 2 x 2 d^2 through W3 and W2); momentum and decay
    (2 + 4) x 3 d^2 per KV head and chunk; value mixer 2 D Hkv per token in Titan layers after the
    first. Attention in the converted layers sees its segment only: 4 H d per pair fewer.
    State: per memory layer fast weights, momentum and batch anchor, 3 x 3 Hkv d^2 fp32, and the
    incomplete chunk's keys and values, 2 Hkv d r fp32 (r = tokens mod W); every converted layer
    keeps its segment's KV (r tokens, compute dtype) instead of all `tokens`.
    """
    H, Hk, d, D = conf.num_attention_heads, conf.kv_heads, conf.dim_per_head, conf.hidden_size
    W, L = titan.segment_length, conf.num_hidden_layers
    converted = L if titan.local_later_layers else titan.layers
    memories = titan.layers if titan.memory else 0
    chunks, r = divmod(tokens, W)
    per_layer = {"read": 6.0 * H * d * d * tokens, "gate": 2.0 * D * H * d * tokens,
                 "rates": 2.0 * Hk * d * Hk * tokens + 4.0 * Hk * d * Hk * chunks,
                 "write": 16.0 * d * d * Hk * W * chunks, "update": 18.0 * d * d * Hk * chunks}
    flops = {k: v * memories for k, v in per_layer.items()}
    mixers = max(converted - 1, 0) if titan.value_residual else 0
    flops["value_mix"] = 2.0 * D * Hk * tokens * mixers if titan.memory else 0.0
    flops["attention_saved"] = -4.0 * H * d * converted * (key_pairs(0, tokens) - segment_pairs(tokens, W))
    flops["total"] = sum(flops.values())
    kv_token = 2 * Hk * d * dtype_bytes
    state = {"memory_weights": 4 * 9 * Hk * d * d * memories if chunks else 0,
             "pending_chunk": 4 * 2 * Hk * d * r * memories, "segment_kv": kv_token * r * converted,
             "full_kv": kv_token * tokens * (L - converted)}
    state["total"] = sum(state.values())
    return {"flops": flops, "state_bytes": state, "full_attention_kv_bytes": kv_token * tokens * L}


def _attention_config(run_cfg: RunConfig):
    """The backbone's AttentionConfig without weights (Titan's costs need its head shapes)."""
    from memexp.backbones.attention.model import AttentionConfig
    from memexp.backbones.shapes import config_fields

    fields, source = config_fields(run_cfg.backbone)
    return AttentionConfig.from_dict(fields, strict=run_cfg.backbone.pretrained is None, where=source)


class TitanCosts(MethodCosts):
    # Titan's added FLOPs are its own section (memory read and write against the attention it saves),
    # not NoteBank's added-FLOPs ratio, so records carry none
    models_added_flops = False

    def sections(self, run_cfg: Any, shapes: Any, n: Counts) -> dict[str, Any]:
        tokens = n.context + n.question + max(n.output, 1) - 1
        return {"titan": titan_costs(_attention_config(run_cfg), run_cfg.method, tokens, shapes.dtype_bytes)}

    def table_rows(self, report: dict[str, Any]) -> list[tuple[str, str]]:
        t = report["titan"]
        rows = [("", "")] + [(f"Titan FLOPs: {k}", format_flops(v)) for k, v in t["flops"].items()]
        rows += [(f"Titan state: {k}", format_bytes(v)) for k, v in t["state_bytes"].items()]
        rows.append(("full-attention KV cache", format_bytes(t["full_attention_kv_bytes"])))
        return rows
