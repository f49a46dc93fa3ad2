"""How much each token weighs in tiny_gdn_words' lexical heads: the norm of its whitened input.

The lexical bag heads (memexp.embedded.lexical_heads) project layer 0's normalised inputs after
`text_whitening`, an IDF-like weight over the 128 input directions. This prints, for the listed
tokens, their share of the training text and the norm of their whitened input, so that one can
see where the weight stops growing (docs/benchmarks.md, "six layer-0 changes for the UUID
representative"). Counts come from the recipe's own training examples, as in
scripts/probe/lexical_route_heads.py.

    python scripts/probe/whitened_token_weights.py
    python scripts/probe/whitened_token_weights.py --documents
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from memexp.backbones.norms import rms_norm  # noqa: E402
from memexp.core.schema import ASSETS_DIR  # noqa: E402
from memexp.embedded.lexical_heads import text_whitening, token_counts, weighted_mean_direction  # noqa: E402

GROUPS = {
    "frequent": ["▁the", "▁is", ".", "▁of", "▁and", "▁special", "▁magic", "▁for"],
    "hex": list("0123456789abcdef") + ["557", "069", "ea"],
    "key words": ["▁abundant", "lobster", "▁curious"],
}


def whitened_norms(x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """||W x_v|| for every row of x [V, D], W the recipe's whitening for `counts` [V] -> [V]."""
    white = text_whitening(x, counts, weighted_mean_direction(x, counts))
    return (x @ white.T).norm(dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=ASSETS_DIR / "tiny_gdn_words")
    parser.add_argument("--examples", type=int, default=60, help="training examples for the token counts")
    parser.add_argument("--documents", action="store_true", help="count the examples a token occurs in")
    args = parser.parse_args()
    from memexp.backbones.loading import load_tokenizer

    config = json.loads((args.checkpoint / "config.json").read_text())
    w = load_file(str(args.checkpoint / "model.safetensors"))
    x = rms_norm(w["model.embeddings.weight"], w["model.layers.0.attn_norm.weight"], config["norm_eps"])
    tokenizer = load_tokenizer(str(args.checkpoint), args.checkpoint)
    counts = token_counts(tokenizer, x.shape[0], args.examples, documents=args.documents)
    norms = whitened_norms(x, counts)
    vocab = json.loads((args.checkpoint / "tokenizer.json").read_text())["model"]["vocab"]
    for group, tokens in GROUPS.items():
        for token in tokens:
            if token in vocab:
                i = vocab[token]
                print(f"{group:10s} {token!r:12s} share {100 * counts[i] / counts.sum():6.3f} %   "
                      f"whitened norm {norms[i]:5.2f}")
    print(f"median over the vocabulary: {norms.median():.2f}")


if __name__ == "__main__":
    main()
