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

# How a count was obtained, the word before the colon of its `inputs.basis` entry: given on the command
# line, measured (a run folder's mean), bounded by the method's settings (R·B, W·floor(T/C)), or
# assumed (the paper's GDN setting, whatever the backbone's tokenizer).
ASSUMED_QUESTION = (f"assumed: the paper's GDN questions, {PAPER_QUESTION_TOKENS} tokens (App. C.6); "
                    f"other tokenizers differ")
ASSUMED_OUTPUT = f"assumed: RULER's {PAPER_OUTPUT_TOKENS}-token answers"
MEMEXP_HELPER = "memexp's own: the coordinate selection, J·d_rho int64 (App. C.7's implementation: 0.402 MiB)"
# the symbols the table names the counts by, in the order it lists them
SYMBOLS = {"context": "T", "question": "|Q|", "output": "|Y|", "replay": "|R|", "notes": "N_T", "archived": "U",
           "helper": "M_helper"}


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


def cost_report(run_cfg: RunConfig, length: int, question_tokens: float | None = None,
                output_tokens: int | None = None, replay_tokens: float | None = None,
                notes: float | None = None, archived_tokens: float | None = None,
                helper_bytes: float | None = None, basis: dict[str, str] | None = None) -> dict[str, Any]:
    """Analytical FLOPs and persistent storage of `run_cfg` at `length` context tokens.

    Shapes come from the backbone's config without weights (memexp.backbones.shapes.shapes_for).
    |Q| and |Y| that are not given are the paper's GDN setting (PAPER_QUESTION_TOKENS,
    PAPER_OUTPUT_TOKENS); NoteBank counts that are not given are bounded (`inputs.assumed` lists
    which); pass the recorded means to reproduce a measured setting. `basis` labels the given counts
    by where they came from ("measured: mean of 600 records"; default "given"); `inputs.basis` then
    says for every count how it was obtained. Precision is bf16 unless backbone.dtype=float32. All
    figures are plain numbers (FLOPs, bytes) for `--json`.
    """
    _check_counts(length=length, question_tokens=question_tokens, output_tokens=output_tokens,
                  replay_tokens=replay_tokens, notes=notes, archived_tokens=archived_tokens, helper_bytes=helper_bytes)
    shapes = shapes_for(run_cfg.backbone)
    model = method_costs(run_cfg.method.name)
    question = PAPER_QUESTION_TOKENS if question_tokens is None else question_tokens
    output = PAPER_OUTPUT_TOKENS if output_tokens is None else output_tokens
    n = model.counts(run_cfg.method, length, question, output, replay_tokens, notes, archived_tokens)
    given = {"context": length, "question": question_tokens, "output": output_tokens, "replay": replay_tokens,
             "notes": notes, "archived": archived_tokens, "helper": helper_bytes}
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
    costs = _costs(shapes, model, run_cfg.method, n, helper_bytes)
    report["inputs"]["basis"] = _basis(given, basis or {}, n, has_archive=bool(costs["storage"]["archive"]))
    return {**report, **costs}


def _basis(given: dict[str, float | None], labels: dict[str, str], n: Counts, has_archive: bool) -> dict[str, str]:
    """How each count of a report was obtained: the caller's label for a given one ("given" by
    default), the method's bound for an unrecorded one, the paper's GDN setting for |Q| and |Y|;
    NoteBank's counts only where the method bounded or was given them, the helper only with an archive."""
    defaults = {"question": ASSUMED_QUESTION, "output": ASSUMED_OUTPUT, "helper": MEMEXP_HELPER, **n.basis}
    out = {}
    for name in SYMBOLS:
        if given[name] is not None:
            out[name] = labels.get(name, "given")
        elif name in defaults and (name != "helper" or has_archive):
            out[name] = defaults[name]
    return out


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
        *_input_rows(i),
        ("", ""),
        ("backbone FLOPs / token (f_phi)", f"{f['backbone_per_token']:.4e}"),
        ("LM head FLOPs / token (h_phi)", f"{f['lm_head_per_token']:.4e}"),
    ]
    if f["attention_per_key"]:
        rows.append(("attention FLOPs / (query, key)", f"{f['attention_per_key']:.4e}"))
    rows.append(("Plain FLOPs (Eq. 12)", format_flops(f["plain"]) + _used(i, "question", "output")))
    if f["added"]:
        for part in ("write", "route", "probe", "replay", "attention"):
            if f["added"][part]:
                rows.append((f"  added: {part}", format_flops(f["added"][part]) + _used(i, *PART_INPUTS[part])))
        every = ("question", "output", "replay", "notes")
        rows.append(("added FLOPs (Eq. 13)", format_flops(f["added"]["total"]) + _used(i, *every)))
        rows.append(("added FLOPs ratio (Eq. 16)", f"{f['added_ratio_percent']:.4f} %" + _used(i, *every)))
    rows += [("", ""), ("recurrent state", format_bytes(s["state"]["recurrent"])), ("conv state", format_bytes(s["state"]["conv"]))]
    if s["state"]["kv"]:
        rows.append(("KV cache", format_bytes(s["state"]["kv"])))
    a = s["archive"]
    if a:
        rows += [("note addresses (device)", format_bytes(a["device_addresses"]) + _used(i, "notes")),
                 ("helper tensors (device)", format_bytes(a["device_helpers"]) + _used(i, "helper")),
                 ("  device archive total", format_bytes(a["device_addresses"] + a["device_helpers"])
                  + _used(i, "notes", "helper")),
                 ("token ids + span metadata (host)", format_bytes(a["host_token_ids"] + a["host_metadata"])
                  + _used(i, "archived", "notes"))]
    kv = ("question",) if s["state"]["kv"] else ()
    rows += [("persistent storage (Eq. 20)", format_bytes(s["total"]) + _used(i, *kv, "notes", "archived", "helper")),
             ("matched full-MHA KV cache (Eq. 17)", format_bytes(s["mha_kv_cache"]) + _used(i, "question"))]
    if s["mha_over_total"]:
        rows.append(("MHA cache / persistent storage", f"{s['mha_over_total']:,.0f} x"))
    rows += method_costs(report["method"]["name"]).table_rows(report)
    if i["assumed"]:
        rows.append(("bounds used", "; ".join(i["assumed"])))
    if "note" in report:
        rows.append(("note", report["note"]))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" if k else "" for k, v in rows)


# the counts each added-FLOPs part is computed from besides T (Eqs. 13-15)
PART_INPUTS = {"write": (), "route": ("question", "notes"), "probe": ("question",), "replay": ("replay",),
               "attention": ("question", "replay", "output")}


def count_text(value: float) -> str:
    """A count as the table prints it: 4,096 or 4,092.3 (a mean keeps its decimals)."""
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _input_rows(i: dict[str, Any]) -> list[tuple[str, str]]:
    """One row per count the figures use: its value and how it was obtained (`inputs.basis`)."""
    basis = i.get("basis", {})
    rows = [("tokens", f"T = {i['context']:,} ({basis.get('context', 'given')})")]
    for name, how in basis.items():
        if name not in ("context", "helper"):
            rows.append((f"  {SYMBOLS[name]}", f"{count_text(i[name])} ({how})"))
    if "helper" in basis:
        rows.append(("  M_helper", basis["helper"]))
    return rows


def _used(i: dict[str, Any], *names: str) -> str:
    """Beside a figure: the counts it used and whether each was given, measured, bounded or assumed."""
    basis = i.get("basis", {})
    used = [f"{SYMBOLS[n]} {count_text(i[n]) + ' ' if n != 'helper' else ''}{basis[n].split(':')[0]}"
            for n in names if n in basis]
    return f"   [{', '.join(used)}]" if used else ""


def _check_counts(**counts: float | None) -> None:
    """Token and byte counts of `cost_report`: a context has at least one token, nothing is negative
    (a negative count gave negative FLOPs)."""
    for name, value in counts.items():
        low = 1 if name == "length" else 0
        if value is not None and value < low:
            raise ConfigError(f"{name}={value}: must be a number >= {low}")
