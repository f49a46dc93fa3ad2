"""NoteBank's analytical costs (NoteBank paper, Eqs. 13-15 and 17-20): the FLOPs its writing,
routing, probe and replay add to Plain, and the archive it stores. Registered as NoteBank's
`costs` (memexp.costs.method), which memexp.costs.report assembles with Plain's figures."""

from __future__ import annotations

import math
from typing import Any

from memexp.backbones.shapes import BackboneShapes
from memexp.costs.method import Counts, MethodCosts
from memexp.costs.report import count_text, key_pairs
from memexp.methods.notebank.config import NoteBankConfig


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


def written_chunks(nb: NoteBankConfig, context: int) -> tuple[int, str]:
    """The chunks that write notes, and how they were counted: only complete chunks write (Eq. 7: a
    chunk is written once it holds C tokens), floor(T/C); with method.write_tail the incomplete last
    chunk is written too, ceil(T/C)."""
    if nb.write_tail:
        return math.ceil(context / nb.chunk_size), "ceil"
    return context // nb.chunk_size, "floor"


class NoteBankCosts(MethodCosts):
    def counts(self, nb: NoteBankConfig, context: int, question: float, output: int, replay: float | None,
               notes: float | None, archived: float | None, probe: float | None = None) -> Counts:
        """Unrecorded counts filled with their bounds: W notes per written chunk, full-length notes
        (B tokens), R notes replayed in full (|R| <= R B)."""
        assumed, basis = [], {}
        if notes is None:
            chunks, rounding = written_chunks(nb, context)
            notes = nb.write_budget * chunks
            assumed.append(f"notes = W * {rounding}(T / C)")
            basis["notes"] = f"bound: W·{rounding}(T/C) = {nb.write_budget}·{chunks:,}"
        if archived is None:
            archived = notes * nb.span_budget
            assumed.append("archived tokens = notes * B")
            basis["archived"] = f"bound: N_T·B = {count_text(notes)}·{nb.span_budget}"
        if replay is None:
            replay = min(nb.replay_budget, notes) * nb.span_budget
            assumed.append("replay tokens = R * B")
            basis["replay"] = f"bound: R·B = {count_text(min(nb.replay_budget, notes))}·{nb.span_budget}"
        return Counts(context, question, output, float(replay), float(notes), float(archived), probe, tuple(assumed),
                      basis)

    def describe(self, shapes: BackboneShapes, nb: NoteBankConfig) -> dict[str, Any]:
        return {"C": nb.chunk_size, "W": nb.write_budget, "B": nb.span_budget, "R": nb.replay_budget,
                "d_rho": nb.address_dim, "tail": nb.tail, **_layers_entry(shapes, nb)}

    def added_flops(self, shapes: BackboneShapes, nb: NoteBankConfig, n: Counts) -> dict[str, float]:
        return notebank_added_flops(shapes, nb, n.context, n.question, n.replay, n.notes, n.output, n.probe)

    def archive_bytes(self, shapes: BackboneShapes, nb: NoteBankConfig, n: Counts,
                      helper_bytes: float | None) -> dict[str, float]:
        return notebank_storage(shapes, nb, n.notes, n.archived, helper_bytes)
