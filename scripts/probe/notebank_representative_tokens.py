"""Why a channel misses its needle's note: Eq. 4's representative token, one channel at a time.

A note's address on channel (l, h) is the native query at the note's most distinctive key for
that channel (the representative token, Eq. 4). For every asked key whose needle lies in a
written note, this script reads the whole context's per-channel distinctiveness and queries
(the writer's own features, chunk by chunk) and counts, per channel:

- representative: the needle note's representative token is one of the key's tokens;
- key query wins: the query at one of the needle's key tokens scores higher against the
  question (max cosine over question positions, Eq. 5) than every other note's address: had
  Eq. 4 picked that token, the channel would have voted for the needle's note.

It also lists the tokens that were picked as representatives in the needle notes, most
common first, and, for each part of the needle sentence (its template words "One of the
special magic numbers for ... is: .", the key, the value with the space before it), where
that part's distinctiveness ranks within its chunk: the mean percentile over channels and
needles (100 = the chunk's most distinctive key). Eq. 4 can pick a key token only where the
key ranks high.

    python scripts/probe/notebank_representative_tokens.py bench.seed=8 "method.layers=[1,2,3]"

Arguments are `memexp run` overrides over experiment=tiny_gdn_words_lengths method=notebank at
16K tokens, 5 examples of each single-needle task (override any of them). Run it on validation
seeds, never on the seeds a table reports.
"""

from __future__ import annotations

import argparse
from collections import Counter

import torch
import torch.nn.functional as F

from memexp.backbones import load_backbone
from memexp.backbones.base import as_ids
from memexp.benchmarks import build_benchmark
from memexp.core.compose import load_config
from memexp.kernels import routing
from memexp.methods import build_method
from memexp.methods.notebank.features import ChunkFeatures
from memexp.methods.notebank.writer import representatives

BASE = ["experiment=tiny_gdn_words_lengths", "method=notebank", "bench.lengths=[16384]", "bench.num_samples=5",
        "bench.tasks=[niah_single_1,niah_single_2,niah_single_3]", "method.address_dim=null"]


def context_features(method, backbone, context_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(distinctiveness [T', J], compacted queries [T', J, d]) of the completed chunks' T' tokens,
    as the writer receives them (the state carried across chunks)."""
    layout, compactor = method.addressing(backbone)
    ids, size = as_ids(context_ids), method.cfg.chunk_size
    state, scores, queries = backbone.init_state(), [], []
    for chunk in range(len(ids) // size):
        features = ChunkFeatures(layout, compactor, size, backbone.device)
        backbone.forward(state, ids[chunk * size : (chunk + 1) * size].to(backbone.device), features)
        scores.append(features.scores.cpu())
        queries.append(features.queries.float().cpu())
    return torch.cat(scores), torch.cat(queries)


def best_match(queries: torch.Tensor, question: torch.Tensor) -> torch.Tensor:
    """Per channel, the best Eq. 5 score any of `queries` [P, J, d] would get against the
    question's queries [Tq, J, d] as a note's address: max over both positions -> [J]."""
    sims = torch.einsum("pjd,tjd->jpt", F.normalize(queries, dim=-1), F.normalize(question, dim=-1))
    return sims.flatten(1).amax(dim=1)


def find(ids: list[int], piece: list[int], start: int) -> int | None:
    """The first position >= start where `piece` occurs in `ids`."""
    for i in range(start, len(ids) - len(piece) + 1):
        if ids[i : i + len(piece)] == piece:
            return i
    return None


def needle_parts(ids: list[int], key_at: int, key_len: int, value_ids: list[int], first: set[int]) -> dict[str, list[int]]:
    """The positions of one needle sentence's parts: 'key' (the key's tokens from `key_at`),
    'value' (the value's tokens, the space before it included), 'template' (the sentence's
    other tokens: back to its first word, a token in `first`, and from the key to the value and
    the period after it). Positions past the end of `ids` are left out."""
    start = key_at
    while start > max(0, key_at - 12) and ids[start] not in first:
        start -= 1
    value_at = find(ids, value_ids, key_at + key_len)
    if value_at is None or ids[start] not in first:
        return {}
    template = list(range(start, key_at)) + list(range(key_at + key_len, value_at)) + [value_at + len(value_ids)]
    parts = {"template": template, "key": list(range(key_at, key_at + key_len)),
             "value": list(range(value_at, value_at + len(value_ids)))}
    return {name: [t for t in where if t < len(ids)] for name, where in parts.items()}


def chunk_percentiles(scores: torch.Tensor, positions: list[int], chunk_size: int) -> torch.Tensor:
    """Each position's distinctiveness percentile within its own chunk, per channel: the share of
    the chunk's tokens whose score is lower, x 100. scores [T', J] -> [len(positions), J]."""
    rows = []
    for t in positions:
        chunk = scores[(t // chunk_size) * chunk_size : (t // chunk_size + 1) * chunk_size]
        rows.append(100 * (chunk < scores[t]).float().mean(dim=0))
    return torch.stack(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    torch.set_num_threads(2)
    cfg = load_config(BASE + args.overrides)
    backbone = load_backbone(cfg.backbone)
    method = build_method(cfg.method)
    method.prepare(backbone)
    channels = method.addressing(backbone)[0].channels
    tok = backbone.tokenizer
    picked, wins, cases = torch.zeros(len(channels)), torch.zeros(len(channels)), 0
    tokens = Counter()
    first = set(tok.encode("One")[:1] + tok.encode(" One")[-1:])  # the needle's first word, after a newline or a space
    ranks: dict[str, list[torch.Tensor]] = {"template": [], "key": [], "value": []}
    for example in build_benchmark(cfg.bench).examples(tok):
        ids = tok.encode(example.context)
        memory = method.read(backbone, ids)
        archive = memory.extra
        scores, queries = context_features(method, backbone, ids)
        question = example.questions[0]
        probe = method._probe(backbone, memory, tok.encode(question.prompt)).float().cpu()
        _, _, note_scores = routing.route_votes(archive.addresses.float().cpu(), probe)  # [J, N]
        for needle in example.meta["needles"]:
            if needle["key"] not in example.meta["queries"]:
                continue
            key_ids = tok.encode(" " + needle["key"])
            at = find(ids, key_ids, len(tok.encode(example.context[: needle["offset"]])) - 1)
            if at is None or at >= scores.shape[0]:
                continue  # the needle is in the last, unwritten chunk
            key = torch.arange(at, at + len(key_ids))
            notes = [i for i, (s, n) in enumerate(zip(archive.starts.tolist(), archive.lengths.tolist()))
                     if s <= at < s + n]
            if not notes:
                continue  # the writer kept no note with this needle
            s, n = int(archive.starts[notes[0]]), int(archive.lengths[notes[0]])
            chosen = s + representatives(scores[s : s + n])  # [J]
            others = note_scores.clone()
            others[:, notes[0]] = -float("inf")
            picked += torch.isin(chosen, key).float()
            wins += (best_match(queries[key], probe) > others.amax(dim=1)).float()
            tokens.update(tok.decode([ids[int(t)]]) for t in chosen)
            cases += 1
            parts = needle_parts(ids, at, len(key_ids), tok.encode(" " + needle["value"]), first)
            for name, where in parts.items():
                inside = [t for t in where if t < scores.shape[0]]
                if inside:
                    ranks[name].append(chunk_percentiles(scores, inside, method.cfg.chunk_size).mean(dim=0))
    print(f"needles in a written note: {cases}; layers {cfg.method.layers or 'all'}")
    print("channel (layer, head): share of needles whose representative is a key token | whose key query wins")
    for ch, p, w in zip(channels, picked.tolist(), wins.tolist()):
        print(f"  ({ch.layer}, {ch.head}): {p / max(cases, 1):.2f} | {w / max(cases, 1):.2f}")
    total = cases * len(channels)
    print(f"all channels: representative is a key token {int(picked.sum())} / {total}; "
          f"a key token's query wins {int(wins.sum())} / {total}")
    print("representative tokens in the needles' notes: "
          + ", ".join(f"{t!r} {c}" for t, c in tokens.most_common(8)))
    print("the needle sentence's parts, distinctiveness percentile within their chunk (mean over channels; "
          "per layer):")
    layers = sorted({ch.layer for ch in channels})
    for name, rows in ranks.items():
        if not rows:
            continue
        mean = torch.stack(rows).mean(dim=0)  # [J]
        per_layer = " ".join(f"{mean[[j for j, ch in enumerate(channels) if ch.layer == layer]].mean():.0f}"
                             for layer in layers)
        print(f"  {name}: {mean.mean():.0f} (layers {layers}: {per_layer})")


if __name__ == "__main__":
    main()
