"""A tiny_gdn_words checkpoint whose layer-0 heads are lexical bag heads, to probe native routing.

How far could NoteBank's native router (Eq. 4-5) go on channels that match words? This rewires
the listed heads of layer 0 as memexp.embedded.lexical_heads describes (query conv the mean of
t .. t-c+1; key conv the mean of t-1 .. t-c+1, or the current token with `--key current`;
q_proj = k_proj a fixed random projection orthogonal to the text-weighted mean direction of the
layer's normalised inputs, std `--scale` over the vocabulary). The text weights are token counts
of the recipe's own training examples (stream TEXT_STREAM), never an evaluation seed's. Routing
on layer 0 alone (`method.layers=[0]`) reads only the embeddings, layer 0's norm and these
heads, so it can be measured on a trained model's embeddings without training; the
checkpoint's Plain answers are not meaningful. The other options are the variants
docs/benchmarks.md measured against the recipe's form (`--whiten-eps`, `--key-taps`,
`--common-key`, `--document-frequency`, a wider `--conv-size`); `--checkpoint` a rewired
folder rewires a second set of heads another way.

    python scripts/probe/lexical_route_heads.py --out outputs/probe/lexical
    python scripts/probe/notebank_channel_votes.py bench.seed=8 "method.layers=[0]" bench.num_samples=10 \\
        backbone.pretrained=$PWD/outputs/probe/lexical --draws 0

Run the votes on validation seeds (7, 8), never on the seeds a table reports.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from memexp.backbones.norms import rms_norm  # noqa: E402
from memexp.core.schema import ASSETS_DIR  # noqa: E402
from memexp.embedded.lexical_heads import (  # noqa: E402
    WHITEN_EPS,
    lexical_projection,
    text_whitening,
    token_counts,
    weighted_mean_direction,
    widen_convs,
    wire_bag_convs,
)


def common_key_row(x: torch.Tensor, counts: torch.Tensor, mean: torch.Tensor, level: float) -> torch.Tensor:
    """A k_proj row [D] along the unit `mean` [D] whose output is `level` on the count-weighted
    average row of x [V, D]: a coordinate every key shares (the queries read 0 there), so that a
    bag's cosine with the chunk's mean key falls only as far as its whitened, IDF-weighted
    lexical part outweighs it."""
    average = (counts @ (x @ mean)) / counts.sum()
    return mean * level / average


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=ASSETS_DIR / "tiny_gdn_words")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--conv-size", type=int, default=10)
    parser.add_argument("--heads", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--key", choices=["bag", "current"], default="bag")
    parser.add_argument("--key-taps", type=int, default=None,
                        help="bag keys over t-1 .. t-K only (default: all conv_size - 1 taps before t)")
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--whiten", action="store_true", help="whiten the inputs by the text's second moment first")
    parser.add_argument("--whiten-eps", type=float, default=WHITEN_EPS,
                        help="text_whitening's eps: the floor on the second moment's eigenvalues, as a share of "
                             "their mean; larger caps the weight of rare words (an IDF ceiling)")
    parser.add_argument("--common-key", type=float, default=0.0,
                        help="give every key a shared coordinate (head coordinate 0, the text-weighted mean "
                             "direction, this value on the text's average token; queries read 0 there), so that "
                             "a bag of frequent words is close to the chunk's mean key and only rare words stand out")
    parser.add_argument("--document-frequency", action="store_true",
                        help="weigh the mean direction and the whitening by the number of examples a token occurs "
                             "in rather than by its occurrences")
    parser.add_argument("--examples", type=int, default=60, help="training examples for the token counts")
    args = parser.parse_args()
    if args.key_taps is not None and (args.key != "bag" or not 1 <= args.key_taps < args.conv_size):
        parser.error(f"--key-taps={args.key_taps}: needs --key bag and a value from 1 to --conv-size - 1 ({args.conv_size - 1})")
    from memexp.backbones.loading import load_tokenizer

    config = json.loads((args.checkpoint / "config.json").read_text())
    weights = widen_convs(load_file(str(args.checkpoint / "model.safetensors")), args.conv_size)
    x = rms_norm(weights["model.embeddings.weight"], weights["model.layers.0.attn_norm.weight"], config["norm_eps"])
    counts = token_counts(load_tokenizer(str(args.checkpoint), args.checkpoint), x.shape[0], args.examples,
                          documents=args.document_frequency)
    mean = weighted_mean_direction(x, counts)
    print(f"the text-weighted mean direction: {100 * ((x @ mean).pow(2) * counts).sum() / (x.pow(2).sum(1) * counts).sum():.0f} "
          "% of the text's squared norm (projected out)")
    prefix, head_dim = "model.layers.0.attn.", config["head_dim"]
    white = text_whitening(x, counts, mean, eps=args.whiten_eps) if args.whiten else torch.eye(x.shape[1])
    for head in args.heads:
        rows = slice(head * head_dim, (head + 1) * head_dim)
        wire_bag_convs(weights[prefix + "q_conv1d.weight"], weights[prefix + "k_conv1d.weight"], rows, args.key,
                       args.key_taps)
        basis = torch.randn(head_dim, x.shape[1], generator=torch.Generator().manual_seed(100 + head))
        projection = lexical_projection(x, mean, basis @ white, args.scale)
        weights[prefix + "q_proj.weight"][rows] = projection
        weights[prefix + "k_proj.weight"][rows] = projection
        if args.common_key:
            weights[prefix + "q_proj.weight"][rows.start] = 0.0
            weights[prefix + "k_proj.weight"][rows.start] = common_key_row(x, counts, mean, args.common_key)
    args.out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(args.out / "model.safetensors"))
    (args.out / "config.json").write_text(json.dumps({**config, "conv_size": args.conv_size}, indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "recipe.json"):
        if (args.checkpoint / name).exists():  # a checkpoint mid-recipe has no recipe.json yet
            shutil.copy(args.checkpoint / name, args.out / name)
    print(f"wrote {args.out}: layer 0 heads {args.heads} lexical ({args.key} keys, {args.conv_size} taps, scale {args.scale})")


if __name__ == "__main__":
    main()
