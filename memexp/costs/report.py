"""Analytical FLOPs and persistent storage (NoteBank paper, Section 5, App. C.5-C.7).

Multiply-adds count as two FLOPs. A backbone enters only through its `BackboneShapes`
(memexp.backbones.shapes; each architecture's costs module computes them):

    f_phi   backbone FLOPs per token without the LM head (2 d_in d_out per projection and MLP
            matrix, plus conv and recurrence terms, Eq. 11);
    h_phi   LM-head FLOPs per prediction, 2 D V;
    f_key   attention FLOPs per (query, key) pair, summed over attention layers (4 H d_head).

Plain (Eq. 12), the added-FLOPs ratio (Eq. 16) and the matched MHA cache (Eq. 17) are here; what a
method adds (NoteBank's Eqs. 13-15 and its archive, Eqs. 18-20; Titan's memory) is its own cost model,
registered beside it (memexp.costs.method). `cost_report` assembles them for a run config and
`record_costs` for one recorded question.
"""

from __future__ import annotations

from typing import Any

from memexp.backbones.shapes import BackboneShapes, shapes_for
from memexp.core.schema import ConfigError, MethodConfig, RunConfig
from memexp.costs.method import Counts, MethodCosts, method_costs

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


def mha_kv_cache_bytes(layers: int, hidden_size: int, length: int, dtype_bytes: int = 2) -> int:
    """Eq. 17: keys and values of full multi-head attention (no KV-head sharing) matched in
    width and depth, 2 * dtype_bytes * L * D * P (4 L D P in BF16)."""
    return 2 * dtype_bytes * layers * hidden_size * length


def _costs(shapes: BackboneShapes, model: MethodCosts, cfg: Any, n: Counts, helper_bytes: float | None) -> dict:
    plain = plain_flops(shapes, n.context, n.question, n.output)
    state = {"recurrent": shapes.recurrent_bytes, "conv": shapes.conv_bytes,
             "kv": shapes.kv_bytes_per_token * (n.context + n.question if shapes.window is None
                                                else min(n.context + n.question, shapes.window))}
    added = model.added_flops(shapes, cfg, n)
    archive = model.archive_bytes(shapes, cfg, n, helper_bytes)
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
    model = method_costs(run_cfg.method.name)
    n = model.counts(run_cfg.method, length, question_tokens, output_tokens, replay_tokens, notes, archived_tokens)
    report = {
        "backbone": {"name": run_cfg.backbone.name, "arch": shapes.arch, "source": shapes.source,
                     "layers": shapes.layers, "hidden_size": shapes.hidden_size, "vocab_size": shapes.vocab_size,
                     "channels": shapes.channels, "d_k": shapes.d_k, "window": shapes.window,
                     "dtype_bytes": shapes.dtype_bytes},
        "method": {"name": run_cfg.method.name, **model.describe(shapes, run_cfg.method)},
        "inputs": {"context": n.context, "question": n.question, "output": n.output, "replay": n.replay,
                   "notes": n.notes, "archived": n.archived, "assumed": list(n.assumed)},
    }
    sections = model.sections(run_cfg, shapes, n)
    report.update(sections)
    if not sections and not model.models_added_flops:
        report["note"] = f"added FLOPs of method {run_cfg.method.name!r} are not modelled; Plain figures only"
    return {**report, **_costs(shapes, model, run_cfg.method, n, helper_bytes)}


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
    model = method_costs(method.name if method is not None else None)
    notes = tokens.get("notes", stats.get("notes"))
    archived = tokens.get("archived", stats.get("archived_tokens"))
    n = model.counts(method, int(tokens["context"]), tokens.get("question", 0), int(tokens.get("generated", 0)),
                     tokens.get("replay"), notes, archived, tokens.get("probe"))
    c = _costs(shapes, model, method, n, stats.get("address_index_bytes"))
    added = c["flops"]["added"]["total"] if c["flops"]["added"] else 0.0
    return {
        "plain_flops": c["flops"]["plain"],
        "added_flops": added if model.models_added_flops else None,
        "added_flops_ratio": c["flops"]["added_ratio_percent"] if model.models_added_flops else None,
        "state_bytes": sum(c["storage"]["state"].values()),
        "archive_bytes": sum(c["storage"]["archive"].values()),
        "storage_bytes": c["storage"]["total"],
        "mha_kv_cache_bytes": c["storage"]["mha_kv_cache"],
        "assumed": list(n.assumed),
    }


def format_flops(x: float) -> str:
    for unit, scale in (("TFLOPs", 1e12), ("GFLOPs", 1e9), ("MFLOPs", 1e6)):
        if abs(x) >= scale:
            return f"{x / scale:,.4g} {unit}"
    return f"{x:,.0f} FLOPs"


def format_bytes(x: float) -> str:
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
    rows.append(("Plain FLOPs (Eq. 12)", format_flops(f["plain"])))
    if f["added"]:
        for part in ("write", "route", "probe", "replay", "attention"):
            if f["added"][part]:
                rows.append((f"  added: {part}", format_flops(f["added"][part])))
        rows.append(("added FLOPs (Eq. 13)", format_flops(f["added"]["total"])))
        rows.append(("added FLOPs ratio (Eq. 16)", f"{f['added_ratio_percent']:.4f} %"))
    rows += [("", ""), ("recurrent state", format_bytes(s["state"]["recurrent"])), ("conv state", format_bytes(s["state"]["conv"]))]
    if s["state"]["kv"]:
        rows.append(("KV cache", format_bytes(s["state"]["kv"])))
    a = s["archive"]
    if a:
        rows += [("note addresses (device)", format_bytes(a["device_addresses"])),
                 ("helper tensors (device)", format_bytes(a["device_helpers"])),
                 ("  device archive total", format_bytes(a["device_addresses"] + a["device_helpers"])),
                 ("token ids + span metadata (host)", format_bytes(a["host_token_ids"] + a["host_metadata"]))]
    rows += [("persistent storage (Eq. 20)", format_bytes(s["total"])),
             ("matched full-MHA KV cache (Eq. 17)", format_bytes(s["mha_kv_cache"]))]
    if s["mha_over_total"]:
        rows.append(("MHA cache / persistent storage", f"{s['mha_over_total']:,.0f} x"))
    rows += method_costs(report["method"]["name"]).table_rows(report)
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
