"""How much one shared direction dominates each layer's attention inputs and keys.

A key-conditioned read (and NoteBank's cosine routing) needs the keys of different words to point
different ways. This reads RULER examples at 1K (validation seed 8 by default: niah_single_1 in
noise, niah_single_2 and niah_multikey_1 in the essay stand-in) through a tiny_gdn_words
checkpoint and prints, per layer, the share of the mean direction in

- the attention input (after attn_norm, what q_proj and k_proj read), and
- k_proj's output (the keys before the short conv),

each as |mean of the unit vectors|^2 over every position: 1 when all point one way, about 1/d
for independent directions. The recipe field `centered_qk_layers` (memexp.embedded.tiny_gdn_words
.CenteredQK) keeps k_proj orthogonal to the training batches' mean input; this measures what
that leaves on evaluation text.

    python scripts/probe/key_direction_share.py [--checkpoint memexp/assets/tiny_gdn_words] [--seed 8]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F

from memexp.core.schema import ASSETS_DIR

TASKS = ("niah_single_1", "niah_single_2", "niah_multikey_1")


def mean_direction_share(vectors: torch.Tensor) -> float:
    """vectors [N, d] -> |mean of their unit vectors|^2 (in [0, 1])."""
    return F.normalize(vectors, dim=-1).mean(0).pow(2).sum().item()


def main() -> None:
    from memexp.backbones import load_backbone
    from memexp.benchmarks import build_benchmark
    from memexp.core.compose import load_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=ASSETS_DIR / "tiny_gdn_words")
    parser.add_argument("--seed", type=int, default=8, help="RULER seed (a validation seed)")
    parser.add_argument("--samples", type=int, default=2, help="examples per task")
    args = parser.parse_args()
    cfg = load_config(["experiment=tiny_gdn_words_lengths", "method=plain", f"bench.seed={args.seed}",
                       "bench.lengths=[1024]", f"bench.num_samples={args.samples}", f"bench.tasks=[{','.join(TASKS)}]",
                       f"backbone.pretrained={args.checkpoint.resolve()}"])
    backbone = load_backbone(cfg.backbone)
    inputs: dict[int, list[torch.Tensor]] = {}
    hooks = [layer.attn.q_proj.register_forward_pre_hook(
        lambda module, a, i=i: inputs.setdefault(i, []).append(a[0].detach().reshape(-1, a[0].shape[-1])))
        for i, layer in enumerate(backbone.layers)]
    for example in build_benchmark(cfg.bench).examples(backbone.tokenizer):
        ids = backbone.tokenizer.encode(example.context + example.questions[0].prompt)
        with torch.no_grad():
            backbone.forward(backbone.init_state(), torch.tensor([ids]))
    for hook in hooks:
        hook.remove()
    for i, layer in enumerate(backbone.layers):
        x = torch.cat(inputs[i])
        with torch.no_grad():
            keys = layer.attn.k_proj(x)
        print(f"layer {i}: mean direction's share of the attention inputs {mean_direction_share(x):.2f}, "
              f"of k_proj's outputs {mean_direction_share(keys):.2f} ({x.shape[0]} positions)")


if __name__ == "__main__":
    main()
