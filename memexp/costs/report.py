"""Analytical FLOPs and persistent storage (NoteBank paper, Section 5, App. C.5-C.7).

Multiply-adds count as two FLOPs. A backbone enters only through its `BackboneShapes`
(memexp.backbones.shapes; each architecture's costs module computes them):

    f_phi   backbone FLOPs per token without the LM head (2 d_in d_out per projection and MLP
            matrix, plus conv and recurrence terms, Eq. 11);
    h_phi   LM-head FLOPs per prediction, 2 D V;
    f_key   attention FLOPs per (query, key) pair, summed over attention layers (4 H d_head).

Plain (Eq. 12), NoteBank's added FLOPs (Eqs. 13-15), the added-FLOPs ratio (Eq. 16) and
persistent storage (Eqs. 17-20) follow; `cost_report` assembles them for a run config and
`record_costs` for one recorded question.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from memexp.backbones.shapes import BackboneShapes, shapes_for
from memexp.core.registry import METHODS
from memexp.core.schema import ConfigError, MethodConfig, RunConfig
from memexp.methods.notebank.config import NoteBankConfig

MIB = 2**20
GIB = 2**30

# The question and answer lengths behind the paper's 1M-token GDN figures (App. C.6), recovered
# from its own numbers with f_phi = 2.7586e9 and h_phi = 1.311e8:
#   |Y|: mean Plain cost 2891.4 TFLOPs = (P + |Y| - 1) f_phi + |Y| h_phi at P = 1,048,019
#        -> |Y| in about [115, 149]; RULER NIAH generates 128 tokens.
#   |Q|: GDN routing costs 1.09 GFLOPs at N_T = 4092.3 (App. D.1, Fig. 7); Eq. 15 gives
#        |Q| (2 N_T J d_rho + 3 J d_rho) + 3 N_T J d_rho = 1.09e9 -> |Q| = 41.8.
#   |R|: the added 0.722 TFLOPs then leave (|Q| + |R|) f_phi = 0.4106e12 -> |R| = 107.2.
PAPER_QUESTION_TOKENS = 42
PAPER_OUTPUT_TOKENS = 128
PAPER_REPLAY_TOKENS = 107


def key_pairs(start: int, count: int, window: int | None = None) -> int:
    """(query, key) pairs when `count` tokens at positions start.. attend causally (each sees
    itself and every earlier token, at most `window` keys)."""
    if count <= 0:
        return 0
    lo, hi = start + 1, start + count  # keys seen by the first and the last token
    if window is None or hi <= window:
        return (lo + hi) * count // 2
    if lo >= window:
        return window * count
    below = window - lo + 1  # tokens that see fewer than `window` keys
    return (lo + window) * below // 2 + window * (count - below)


def plain_flops(shapes: BackboneShapes, context: int, question: int, output: int) -> float:
    """Eq. 12: (T + |Q| + |Y| - 1) f_phi + |Y| h_phi, plus attention over every earlier key
    for attention layers. The last input position predicts the first answer token."""
    steps = context + question + max(output, 1) - 1
    return steps * shapes.flops_token + output * shapes.flops_lm_head + shapes.flops_key * key_pairs(
        0, steps, shapes.window)


def notebank_channels(shapes: BackboneShapes, nb: NoteBankConfig) -> int:
    """J: the channels NoteBank writes and addresses with, all of the backbone's or those of
    `method.layers` (every recurrent layer has the same number of channels)."""
    if nb.layers is None or not shapes.channel_layers:
        return shapes.channels
    return shapes.channels // len(shapes.channel_layers) * len(nb.layers)


def _layers_entry(shapes: BackboneShapes, nb: NoteBankConfig) -> dict:
    """`method.layers` and the channels J it leaves, in the cost report only when set (so the
    report of every other run stays as it was)."""
    return {} if nb.layers is None else {"layers": nb.layers, "J": notebank_channels(shapes, nb)}


def notebank_added_flops(shapes: BackboneShapes, nb: NoteBankConfig, context: int, question: float, replay: float,
                         notes: float, output: int, probe: float | None = None) -> dict[str, float]:
    """Eqs. 13-15: F_NB - F_Plain = F_write + F_route + (|Q| + |R|) f_phi.

    write:  6 T J d_k + 4 ceil(T/C) J d_k + 2 T J + 6 (C + tail) floor(T/C)   (Eq. 14)
    route:  2 |Q| N_T J d_rho + 3 (|Q| + N_T) J d_rho                           (Eq. 15)
    probe, replay: |Q| f_phi and |R| f_phi, the question match and the replayed notes.
    attention: for hybrid / attention backbones, the keys the probe, the replay and the
    question and answer shifted behind the replay attend to (these do not cancel, App. C.6).
    An empty archive costs the writing only. Eq. 14 is the paper's bound for W = 2, used for
    W = 1 too. `probe` is the probed question length (default |Q| for the native router, 0
    for the others, which do not probe); routing is counted for the native router only (Eq. 15).
    """
    J, d_k, C = notebank_channels(shapes, nb), shapes.d_k, nb.chunk_size
    if J == 0:
        raise ValueError(f"NoteBank needs recurrent channels; backbone arch {shapes.arch!r} has none")
    write = (6 * context * J * d_k + 4 * math.ceil(context / C) * J * d_k + 2 * context * J
             + 6 * (C + nb.tail) * (context // C))
    out = {"write": float(write), "route": 0.0, "probe": 0.0, "replay": 0.0, "attention": 0.0}
    if notes > 0:
        d_rho = min(nb.address_dim or d_k, d_k)
        if probe is None:
            probe = question if nb.router == "native" else 0.0
        if nb.router == "native":
            out["route"] = 2 * probe * notes * J * d_rho + 3 * (probe + notes) * J * d_rho
        out["probe"] = probe * shapes.flops_token
        out["replay"] = replay * shapes.flops_token
        if shapes.flops_key:
            q, r = round(question), round(replay)
            answer = q + max(output, 1) - 1
            pairs = (key_pairs(context, round(probe), shapes.window)
                     + key_pairs(context, r + answer, shapes.window) - key_pairs(context, answer, shapes.window))
            out["attention"] = shapes.flops_key * pairs
    out["total"] = sum(out.values())
    return out


def notebank_helper_bytes(shapes: BackboneShapes, nb: NoteBankConfig) -> int:
    """memexp NoteBank's resident helper: the fixed coordinate selection, [J, d_rho] int64
    (none with identity addresses, address_dim=null)."""
    return 0 if nb.address_dim is None else notebank_channels(shapes, nb) * min(nb.address_dim, shapes.d_k) * 8


def notebank_storage(shapes: BackboneShapes, nb: NoteBankConfig, notes: float, archived_tokens: float,
                     helper_bytes: float | None = None) -> dict[str, float]:
    """Eq. 19 plus helpers: bf16 addresses 2 N_T J d_rho and resident helper tensors on the
    device; int32 token ids 4 U and three uint64 per note (chunk, start, end) 24 N_T on the
    host. `helper_bytes` defaults to `notebank_helper_bytes`."""
    d_rho = min(nb.address_dim or shapes.d_k, shapes.d_k)
    helpers = notebank_helper_bytes(shapes, nb) if helper_bytes is None else helper_bytes
    return {"device_addresses": 2.0 * notes * notebank_channels(shapes, nb) * d_rho, "device_helpers": float(helpers),
            "host_token_ids": 4.0 * archived_tokens, "host_metadata": 24.0 * notes}


def mha_kv_cache_bytes(layers: int, hidden_size: int, length: int, dtype_bytes: int = 2) -> int:
    """Eq. 17: keys and values of full multi-head attention (no KV-head sharing) matched in
    width and depth, 2 * dtype_bytes * L * D * P (4 L D P in BF16)."""
    return 2 * dtype_bytes * layers * hidden_size * length



# Titan-Llama (Pan & Behrouz): the memory's analytical FLOPs and state bytes


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


# Reports


@dataclass(frozen=True)
class _Counts:
    context: int
    question: float
    output: int
    replay: float
    notes: float
    archived: float
    probe: float | None
    assumed: tuple[str, ...]


def _counts(nb: NoteBankConfig | None, context: int, question: float, output: int, replay: float | None,
            notes: float | None, archived: float | None, probe: float | None = None) -> _Counts:
    """Fill unrecorded NoteBank counts with their bounds: W notes per chunk, full-length
    notes (B tokens), R notes replayed in full (|R| <= R B)."""
    assumed = []
    if nb is None:
        return _Counts(context, question, output, 0.0, 0.0, 0.0, None, ())
    if notes is None:
        notes = nb.write_budget * math.ceil(context / nb.chunk_size)
        assumed.append("notes = W * ceil(T / C)")
    if archived is None:
        archived = notes * nb.span_budget
        assumed.append("archived tokens = notes * B")
    if replay is None:
        replay = min(nb.replay_budget, notes) * nb.span_budget
        assumed.append("replay tokens = R * B")
    return _Counts(context, question, output, float(replay), float(notes), float(archived), probe, tuple(assumed))


def _costs(shapes: BackboneShapes, nb: NoteBankConfig | None, n: _Counts, helper_bytes: float | None) -> dict:
    plain = plain_flops(shapes, n.context, n.question, n.output)
    state = {"recurrent": shapes.recurrent_bytes, "conv": shapes.conv_bytes,
             "kv": shapes.kv_bytes_per_token * (n.context + n.question if shapes.window is None
                                                else min(n.context + n.question, shapes.window))}
    added = notebank_added_flops(shapes, nb, n.context, n.question, n.replay, n.notes, n.output, n.probe) if nb else None
    archive = notebank_storage(shapes, nb, n.notes, n.archived, helper_bytes) if nb else {}
    total = sum(state.values()) + sum(archive.values())
    mha = mha_kv_cache_bytes(shapes.layers, shapes.hidden_size, n.context + n.question, shapes.dtype_bytes)
    return {
        "flops": {
            "backbone_per_token": shapes.flops_token,
            "lm_head_per_token": shapes.flops_lm_head,
            "attention_per_key": shapes.flops_key,
            "plain": plain,
            "added": added,
            "added_ratio_percent": 100.0 * added["total"] / plain if added else 0.0,
        },
        "storage": {
            "state": state,
            "archive": archive,
            "total": total,
            "mha_kv_cache": mha,
            "mha_over_total": mha / total if total else None,
        },
    }


def cost_report(run_cfg: RunConfig, length: int, question_tokens: int = PAPER_QUESTION_TOKENS,
                output_tokens: int = PAPER_OUTPUT_TOKENS, replay_tokens: float | None = None,
                notes: float | None = None, archived_tokens: float | None = None,
                helper_bytes: float | None = None) -> dict[str, Any]:
    """Analytical FLOPs and persistent storage of `run_cfg` at `length` context tokens.

    Shapes come from the backbone's config without weights (memexp.backbones.shapes.shapes_for).
    NoteBank counts that are not given are bounded (`inputs.assumed` lists which); pass the
    recorded means to reproduce a measured setting. Precision is bf16 unless
    backbone.dtype=float32. All figures are plain numbers (FLOPs, bytes) for `--json`.
    """
    _check_counts(length=length, question_tokens=question_tokens, output_tokens=output_tokens,
                  replay_tokens=replay_tokens, notes=notes, archived_tokens=archived_tokens, helper_bytes=helper_bytes)
    shapes = shapes_for(run_cfg.backbone)
    nb = run_cfg.method if isinstance(run_cfg.method, NoteBankConfig) else None
    n = _counts(nb, length, question_tokens, output_tokens, replay_tokens, notes, archived_tokens)
    report = {
        "backbone": {"name": run_cfg.backbone.name, "arch": shapes.arch, "source": shapes.source,
                     "layers": shapes.layers, "hidden_size": shapes.hidden_size, "vocab_size": shapes.vocab_size,
                     "channels": shapes.channels, "d_k": shapes.d_k, "window": shapes.window,
                     "dtype_bytes": shapes.dtype_bytes},
        "method": {"name": run_cfg.method.name, **({"C": nb.chunk_size, "W": nb.write_budget, "B": nb.span_budget,
                                                    "R": nb.replay_budget, "d_rho": nb.address_dim,
                                                    "tail": nb.tail, **_layers_entry(shapes, nb)} if nb else {})},
        "inputs": {"context": n.context, "question": n.question, "output": n.output, "replay": n.replay,
                   "notes": n.notes, "archived": n.archived, "assumed": list(n.assumed)},
    }
    from memexp.methods.titan.config import TitanConfig

    if isinstance(run_cfg.method, TitanConfig):
        report["titan"] = titan_costs(_attention_config(run_cfg), run_cfg.method, length + question_tokens +
                                      max(output_tokens, 1) - 1, shapes.dtype_bytes)
    elif nb is None and METHODS.get(run_cfg.method.name).meta.get("adds_flops") is not False:
        report["note"] = f"added FLOPs of method {run_cfg.method.name!r} are not modelled; Plain figures only"
    return {**report, **_costs(shapes, nb, n, helper_bytes)}


def _attention_config(run_cfg: RunConfig):
    """The backbone's AttentionConfig without weights (Titan's costs need its head shapes)."""
    from memexp.backbones.attention.model import AttentionConfig
    from memexp.backbones.shapes import config_fields

    fields, source = config_fields(run_cfg.backbone)
    return AttentionConfig.from_dict(fields, strict=run_cfg.backbone.pretrained is None, where=source)


def record_costs(shapes: BackboneShapes, method: MethodConfig | None, tokens: dict,
                 stats: dict | None = None) -> dict[str, Any]:
    """Per-record accounting from recorded counts, for a backbone's `shapes` (the runner's:
    memexp.backbones.shapes.loaded_shapes) under `method` (None = Plain).

    `tokens`: {'context': T, 'question': |Q|, 'generated': |Y|} plus, for NoteBank, 'replay'
    |R| and optionally 'probe', 'notes' N_T and 'archived' U. `stats`: the read's
    `Memory.stats`; NoteBank's 'notes', 'archived_tokens' and 'address_index_bytes' are used
    when `tokens` lacks them.

    Returns plain_flops, added_flops, added_flops_ratio (percent, Eq. 16 for this record;
    aggregate runs as 100 * sum(added_flops) / sum(plain_flops)), state_bytes, archive_bytes
    (device + host), storage_bytes (their sum), mha_kv_cache_bytes and `assumed`: the counts
    that were not recorded and were bounded instead. Methods other than NoteBank and those
    registered with adds_flops=False (Plain, clean start) get
    added_flops = added_flops_ratio = None (not modelled).
    """
    stats = stats or {}
    nb = method if isinstance(method, NoteBankConfig) else None
    # Plain's reading (Plain, clean start) adds nothing; other methods are modelled only for NoteBank
    modelled = nb is not None or method is None or METHODS.get(method.name).meta.get("adds_flops") is False
    notes = tokens.get("notes", stats.get("notes"))
    archived = tokens.get("archived", stats.get("archived_tokens"))
    n = _counts(nb, int(tokens["context"]), tokens.get("question", 0), int(tokens.get("generated", 0)),
                tokens.get("replay"), notes, archived, tokens.get("probe"))
    c = _costs(shapes, nb, n, stats.get("address_index_bytes"))
    added = c["flops"]["added"]["total"] if c["flops"]["added"] else 0.0
    return {
        "plain_flops": c["flops"]["plain"],
        "added_flops": added if modelled else None,
        "added_flops_ratio": c["flops"]["added_ratio_percent"] if modelled else None,
        "state_bytes": sum(c["storage"]["state"].values()),
        "archive_bytes": sum(c["storage"]["archive"].values()),
        "storage_bytes": c["storage"]["total"],
        "mha_kv_cache_bytes": c["storage"]["mha_kv_cache"],
        "assumed": list(n.assumed),
    }


def _flops(x: float) -> str:
    for unit, scale in (("TFLOPs", 1e12), ("GFLOPs", 1e9), ("MFLOPs", 1e6)):
        if abs(x) >= scale:
            return f"{x / scale:,.4g} {unit}"
    return f"{x:,.0f} FLOPs"


def _bytes(x: float) -> str:
    if abs(x) >= GIB:
        return f"{x / GIB:,.4g} GiB"
    return f"{x / MIB:,.4g} MiB"


def format_cost_table(report: dict[str, Any]) -> str:
    """The report as an aligned two-column table."""
    b, i, f, s = report["backbone"], report["inputs"], report["flops"], report["storage"]
    rows: list[tuple[str, str]] = [
        ("backbone", f"{b['name']} ({b['arch']}; {b['layers']} layers, hidden {b['hidden_size']}, "
                     f"J = {b['channels']} x d_k {b['d_k']}, vocab {b['vocab_size']})"),
        ("shapes from", b["source"]),
        ("method", ", ".join(f"{k}={v}" for k, v in report["method"].items())),
        ("tokens", f"T = {i['context']:,}, |Q| = {i['question']}, |Y| = {i['output']}"
                   + (f", |R| = {i['replay']:,.1f}, N_T = {i['notes']:,.1f}, U = {i['archived']:,.0f}"
                      if report["flops"]["added"] else "")),
        ("", ""),
        ("backbone FLOPs / token (f_phi)", f"{f['backbone_per_token']:.4e}"),
        ("LM head FLOPs / token (h_phi)", f"{f['lm_head_per_token']:.4e}"),
    ]
    if f["attention_per_key"]:
        rows.append(("attention FLOPs / (query, key)", f"{f['attention_per_key']:.4e}"))
    rows.append(("Plain FLOPs (Eq. 12)", _flops(f["plain"])))
    if f["added"]:
        for part in ("write", "route", "probe", "replay", "attention"):
            if f["added"][part]:
                rows.append((f"  added: {part}", _flops(f["added"][part])))
        rows.append(("added FLOPs (Eq. 13)", _flops(f["added"]["total"])))
        rows.append(("added FLOPs ratio (Eq. 16)", f"{f['added_ratio_percent']:.4f} %"))
    rows += [("", ""), ("recurrent state", _bytes(s["state"]["recurrent"])), ("conv state", _bytes(s["state"]["conv"]))]
    if s["state"]["kv"]:
        rows.append(("KV cache", _bytes(s["state"]["kv"])))
    a = s["archive"]
    if a:
        rows += [("note addresses (device)", _bytes(a["device_addresses"])),
                 ("helper tensors (device)", _bytes(a["device_helpers"])),
                 ("  device archive total", _bytes(a["device_addresses"] + a["device_helpers"])),
                 ("token ids + span metadata (host)", _bytes(a["host_token_ids"] + a["host_metadata"]))]
    rows += [("persistent storage (Eq. 20)", _bytes(s["total"])),
             ("matched full-MHA KV cache (Eq. 17)", _bytes(s["mha_kv_cache"]))]
    if s["mha_over_total"]:
        rows.append(("MHA cache / persistent storage", f"{s['mha_over_total']:,.0f} x"))
    if "titan" in report:
        t = report["titan"]
        rows += [("", "")] + [(f"Titan FLOPs: {k}", _flops(v)) for k, v in t["flops"].items()]
        rows += [(f"Titan state: {k}", _bytes(v)) for k, v in t["state_bytes"].items()]
        rows.append(("full-attention KV cache", _bytes(t["full_attention_kv_bytes"])))
    if i["assumed"]:
        rows.append(("bounds used", "; ".join(i["assumed"])))
    if "note" in report:
        rows.append(("note", report["note"]))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" if k else "" for k, v in rows)


def _check_counts(**counts: float | None) -> None:
    """Token and byte counts of `cost_report`: a context has at least one token, nothing is negative
    (a negative count gave negative FLOPs)."""
    for name, value in counts.items():
        low = 1 if name == "length" else 0
        if value is not None and value < low:
            raise ConfigError(f"{name}={value}: must be a number >= {low}")
