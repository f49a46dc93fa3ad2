"""A tiny_gdn_words checkpoint with one hand-wired key-conditioned copy head, to fine-tune and probe.

Every attempt to teach tiny_gdn_words to read by key failed (docs/benchmarks.md): on
niah_multikey_1 its answers are some needle's value, the asked one at chance. This separates
"cannot learn the read" from "the read would not be enough": it writes a copy of a checkpoint
whose short convs are widened to `--conv-size` taps (zeros on the new, older taps, so the model
computes exactly what it did) and whose layer `--layer`, head `--head` is rewired as a copy keyed
on two tokens: half of its key dimensions on the token before t (as the induction init), half on
the token `--key-offset` before t; its query the same halves on t and on `--query-offset` before t.
With the shipped tokenizer, RULER's needle "... for weak - harp ▁is : ▁ 613 ..." puts the key's
last word 4 tokens before the value's first, and the answer prefix "... for weak - harp ▁mentioned
▁in ▁the ▁provided ▁text ▁is" puts it 7 before the "▁" that reads the value: the defaults. So
this wires RULER's template into one head on purpose; it is a probe, not a recipe.

    python scripts/probe/key_head_probe.py --out outputs/train/tiny_gdn_words/keyhead
    OMP_WAIT_POLICY=PASSIVE python -m memexp train recipe=tiny_gdn_words init_from=outputs/train/tiny_gdn_words/keyhead \\
        output=outputs/train/tiny_gdn_words/keyhead_tuned "stages=[{name: tune, steps: 300, batch_size: 8, lr: 1.0e-3, \\
        min_tokens: 128, max_tokens: 1024}]"

`--decorrelate` also gives that head near-orthogonal keys for different words (decorrelate_head);
`--head -1` writes the widened checkpoint alone (the control). The ablations: `--decorrelate
--keep-taps` decorrelates the head but leaves its convs as trained (no wired offsets); `--bag`
wires it as a bag-of-context copy instead (bag_head: no offset chosen for RULER's template).
`--measure CHECKPOINT` reads instead:
for niah_multikey_1 questions at 1K (validation seed 8 by default), each head of `--layer` scores
the needles' value positions with its read query (the "▁" that starts the answer) against the key
written there, and it prints how often the asked needle scores highest and the median margin
(asked minus the best other; the scores are cosines, as GDN's keys and queries are l2-normalised):

    python scripts/probe/key_head_probe.py --measure outputs/train/tiny_gdn_words/keyhead
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from memexp.backbones.norms import rms_norm
from memexp.core.schema import ASSETS_DIR
from memexp.embedded.lexical_heads import lexical_projection, widen_convs


def wire_key_head(weights: dict[str, torch.Tensor], layer: int, head: int, head_dim: int,
                  key_offset: int, query_offset: int) -> None:
    """Rewire one head in place: key dims [0, d/2) on token t-1 and [d/2, d) on t-key_offset; query
    dims on t and t-query_offset; value the current token; the head's q_proj rows set to its
    k_proj rows, so a query meets the key written where the same two tokens stood."""
    prefix = f"model.layers.{layer}.attn."
    half, rows = head_dim // 2, slice(head * head_dim, (head + 1) * head_dim)
    q, k = weights[prefix + "q_conv1d.weight"], weights[prefix + "k_conv1d.weight"]
    taps = q.shape[-1]
    if max(key_offset, query_offset) >= taps:
        raise ValueError(f"offsets {key_offset}, {query_offset} need more than the conv's {taps} taps")
    for w in (q, k):
        w[rows] = 0.0
    start = head * head_dim
    q[start:start + half, 0, -1] = 1.0
    k[start:start + half, 0, -2] = 1.0
    q[start + half:start + head_dim, 0, -1 - query_offset] = 1.0
    k[start + half:start + head_dim, 0, -1 - key_offset] = 1.0
    read_current_token_with_keys(weights, prefix, head, head_dim)


def bag_head(weights: dict[str, torch.Tensor], layer: int, head: int, head_dim: int) -> None:
    """Rewire one head in place as a bag-of-context copy, with no offset chosen for a template: its
    key conv averages the tokens t-1 .. t-c+1 (every tap but the current token), its query conv
    t .. t-c+2, its value the current token, and its q_proj rows set to its k_proj rows. A query
    meets a key in proportion to the words their windows share, wherever they stand."""
    prefix = f"model.layers.{layer}.attn."
    rows = slice(head * head_dim, (head + 1) * head_dim)
    q, k = (weights[prefix + f"{n}_conv1d.weight"] for n in "qk")
    taps = q.shape[-1]
    q[rows] = 0.0
    k[rows] = 0.0
    q[rows, 0, 1:] = 1.0 / (taps - 1)
    k[rows, 0, :-1] = 1.0 / (taps - 1)
    read_current_token_with_keys(weights, prefix, head, head_dim)


def read_current_token_with_keys(weights: dict[str, torch.Tensor], prefix: str, head: int, head_dim: int) -> None:
    """The part both wirings share: the head's value conv passes the current token only, and its
    q_proj rows become its k_proj rows (so a query meets the key written where its taps' tokens stood)."""
    rows = slice(head * head_dim, (head + 1) * head_dim)
    k = weights[prefix + "k_conv1d.weight"]
    v = weights[prefix + "v_conv1d.weight"]
    head_v = v.shape[0] // (k.shape[0] // head_dim)
    values = slice(head * head_v, (head + 1) * head_v)
    v[values] = 0.0
    v[values, 0, -1] = 1.0
    weights[prefix + "q_proj.weight"][rows] = weights[prefix + "k_proj.weight"][rows]


def decorrelate_head(weights: dict[str, torch.Tensor], layer: int, head: int, head_dim: int, eps: float,
                     scale: float = 3.0, seed: int = 0) -> float:
    """Give one head's k_proj (and q_proj, equal) rows a random projection orthogonal to the mean
    direction of the layer's normalised input embeddings, scaled so its outputs over the
    vocabulary have std `scale`. The trained rows of the shipped model project every word onto
    nearly the same direction (the mean carries about half of the embeddings' squared norm), so
    keys of different words start near-parallel; these start near-orthogonal (before the SiLU).
    Returns the mean direction's share of the normalised embeddings' squared norm."""
    prefix = f"model.layers.{layer}.attn."
    x = rms_norm(weights["model.embeddings.weight"], weights[f"model.layers.{layer}.attn_norm.weight"], eps)
    mean = F.normalize(x.mean(0), dim=0)
    basis = torch.randn(head_dim, x.shape[1], generator=torch.Generator().manual_seed(seed))
    r = lexical_projection(x, mean, basis, scale)
    rows = slice(head * head_dim, (head + 1) * head_dim)
    weights[prefix + "k_proj.weight"][rows] = r
    weights[prefix + "q_proj.weight"][rows] = r
    return ((x @ mean).pow(2).sum() / x.pow(2).sum()).item()


def needle_scores(keys: torch.Tensor, read: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """keys [T, H, K] and the read query [H, K] of one layer -> [H, len(positions)] dot products."""
    return torch.einsum("phk,hk->hp", keys[positions], read)


def asked_rank(scores: torch.Tensor, asked: int) -> tuple[torch.Tensor, torch.Tensor]:
    """scores [H, N], the asked needle's column -> (per head, whether it scores highest; its
    margin over the best other needle)."""
    others = torch.cat([scores[:, :asked], scores[:, asked + 1:]], dim=1)
    best_other = others.max(dim=1).values
    return scores[:, asked] > best_other, scores[:, asked] - best_other


def measure(checkpoint: Path, layer: int, seed: int, samples: int) -> None:
    from memexp.backbones import load_backbone
    from memexp.benchmarks import build_benchmark
    from memexp.core.compose import load_config

    cfg = load_config(["experiment=tiny_gdn_words_lengths", "method=plain", f"bench.seed={seed}",
                       "bench.lengths=[1024]", f"bench.num_samples={samples}", "bench.tasks=[niah_multikey_1]",
                       f"backbone.pretrained={checkpoint.resolve()}"])
    backbone = load_backbone(cfg.backbone)
    tok = backbone.tokenizer
    attn = backbone.model.model.layers[layer].attn
    captured = {}
    forward = attn.forward
    attn.forward = lambda x, state, window, emit=None: forward(
        x, state, window, emit=lambda k, q: captured.update(k=k, q=q))
    # the needle's "... is: ▁" before its value, and the "▁" a model emits first when it answers
    before_value = tok.encode(" is: 1")[:3]
    wins, margins = torch.zeros(attn.c.num_heads), []
    for example in build_benchmark(cfg.bench).examples(tok):
        question = example.questions[0]
        ids = list(tok.encode(example.context + question.prompt)) + [before_value[-1]]
        with torch.no_grad():
            backbone.forward(backbone.init_state(), torch.tensor([ids]))
        if captured["k"].shape[0] != len(ids):  # one layer call must have seen the whole prompt
            raise RuntimeError(f"{question.id}: the layer ran in pieces; the probe reads one pass")
        positions = [t for t in range(3, len(ids)) if ids[t - 3:t] == before_value]
        asked = [i for i, t in enumerate(positions)
                 if tok.decode(ids[t:t + 4]).replace(" ", "").startswith(question.references[0])]
        if len(asked) != 1:
            raise RuntimeError(f"{question.id}: the asked needle's value not found once among {len(positions)}")
        won, margin = asked_rank(needle_scores(captured["k"], captured["q"][-1], positions), asked[0])
        wins += won.float()
        margins.append(margin)
    median = torch.stack(margins).median(dim=0).values
    for head in range(attn.c.num_heads):
        print(f"layer {layer} head {head}: the asked needle scores highest for {int(wins[head])} of "
              f"{len(margins)} questions; median margin {median[head]:+.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=ASSETS_DIR / "tiny_gdn_words")
    parser.add_argument("--out", type=Path, help="where to write the probe checkpoint")
    parser.add_argument("--measure", type=Path, help="a checkpoint to measure instead")
    parser.add_argument("--seed", type=int, default=8, help="RULER seed of --measure (a validation seed)")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--conv-size", type=int, default=None,
                        help="taps after widening (default: 8, or the checkpoint's own when it has more)")
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--head", type=int, default=3, help="-1: widen only (the control)")
    parser.add_argument("--key-offset", type=int, default=4)
    parser.add_argument("--query-offset", type=int, default=7)
    parser.add_argument("--decorrelate", action="store_true",
                        help="also give the head near-orthogonal keys for different words (decorrelate_head)")
    wiring = parser.add_mutually_exclusive_group()
    wiring.add_argument("--bag", action="store_true",
                        help="wire the head as a bag-of-context copy (bag_head) instead of the two offsets")
    wiring.add_argument("--keep-taps", action="store_true",
                        help="leave the head's convs as trained: --decorrelate alone, no wired offsets (the ablation)")
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.layer, args.seed, args.samples)
        return
    if not args.out:
        parser.error("--out is required unless --measure is given")
    config = json.loads((args.checkpoint / "config.json").read_text())
    if args.conv_size is None:
        args.conv_size = max(8, config["conv_size"])
    weights = widen_convs(load_file(str(args.checkpoint / "model.safetensors")), args.conv_size)
    if args.keep_taps and not args.decorrelate:
        parser.error("--keep-taps leaves the head as it is unless --decorrelate is given")
    if args.head >= 0:
        if args.bag:
            bag_head(weights, args.layer, args.head, config["head_dim"])
        elif not args.keep_taps:
            wire_key_head(weights, args.layer, args.head, config["head_dim"], args.key_offset, args.query_offset)
        if args.decorrelate:
            share = decorrelate_head(weights, args.layer, args.head, config["head_dim"], config["norm_eps"])
            print(f"the embeddings' mean direction: {100 * share:.0f} % of their squared norm (projected out)")
    args.out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(args.out / "model.safetensors"))
    (args.out / "config.json").write_text(json.dumps({**config, "conv_size": args.conv_size}, indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "recipe.json"):
        shutil.copy(args.checkpoint / name, args.out / name)
    print(f"wrote {args.out}: conv_size {args.conv_size}, "
          + ("no head rewired" if args.head < 0 else f"layer {args.layer} head {args.head} "
             + ("a bag-of-context copy" if args.bag else "decorrelated, its convs as trained" if args.keep_taps else
                f"keyed on t-1 and t-{args.key_offset}, read on t and t-{args.query_offset}")))


if __name__ == "__main__":
    main()
