"""How fast a small GDN learns to copy, from PyTorch's init and from tiny_gdn_words' induction
init (memexp.embedded.tiny_gdn_words.induction_init), side by side in one process.

    python scripts/bench/induction_init.py            # ~3 minutes on 2 cores
    python scripts/bench/induction_init.py --steps 100 --vocab 2000

Task: BOS, 32 tokens drawn from `--alphabet` ids, a separator, the same 32 tokens; the loss and
accuracy are on the second copy. Each row trains a fresh model with the same seed and batches.
"""

import argparse
import random
import time
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from memexp.backbones.gdn.model import GDNBackbone
from memexp.embedded.tiny_gdn import build_model
from memexp.embedded.tiny_gdn_words import induction_init


def train(vocab: int, alphabet: int, tie: bool, induction: bool, steps: int, layers: int, heads: int,
          head_dim: int, seed: int = 0) -> list[tuple[int, float, float]]:
    conf = {"hidden_size": 128, "num_hidden_layers": layers, "num_heads": heads, "head_dim": head_dim,
            "expand_v": 1.0, "hidden_ratio": 4, "vocab_size": vocab, "tie_word_embeddings": tie}
    model = build_model(SimpleNamespace(model=conf, seed=seed, init="torch", decay_min=1e-4, decay_max=1e-3,
                                        conv_init=0.5))
    if tie:
        torch.nn.init.normal_(model.model.embeddings.weight, std=0.1, generator=torch.Generator().manual_seed(seed))
    if induction:
        induction_init(model, 1)
    backbone = GDNBackbone(model, None, "bench", prefill_chunk=2048)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98), weight_decay=0.0)
    rng, n, out = random.Random(seed), 32, []
    for step in range(steps):
        rows = []
        for _ in range(16):
            passage = [rng.randrange(3, 3 + alphabet) for _ in range(n)]
            rows.append([1] + passage + [2] + passage)
        x = torch.tensor(rows)
        logits = model.lm_head(backbone.train_hidden(x[:, :-1])[:, n + 1:])
        target = x[:, n + 2:]
        loss = F.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % 50 == 0:
            out.append((step + 1, loss.item(), (logits.argmax(-1) == target).float().mean().item()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--vocab", type=int, default=258)
    ap.add_argument("--alphabet", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = [("torch init", False, False), ("induction init", False, True), ("induction init, tied", True, True)]
    print(f"copy of 32 tokens from {args.alphabet} ids (vocab {args.vocab}), 2 layers x 2 heads of 64, batch 16")
    print("| init | " + " | ".join(f"step {s}" for s in range(50, args.steps + 1, 50)) + " | seconds |")
    for name, tie, induction in rows:
        t0 = time.perf_counter()
        curve = train(args.vocab, args.alphabet, tie, induction, args.steps, 2, 2, 64)
        cells = " | ".join(f"{100 * acc:.0f} %" for _, _, acc in curve)
        print(f"| {name} | {cells} | {time.perf_counter() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
