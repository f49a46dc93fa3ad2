"""Does a Titan memory carry the needle across segments? A counterfactual probe on the tiny Llama.

For NIAH sequences whose whole needle lies in a segment before the question's (so segmented
attention never sees it), the teacher-forced loss of the true answer is measured twice: with the
true needle, and with the needle's digits replaced by others (same length, the answer tokens
unchanged). delta = loss(counterfactual) - loss(true) is 0 exactly when nothing of the needle
reaches the answer (segmented attention), and large when it does (full attention).

    python scripts/probe/titan_needle_probe.py full segmented memexp/assets/tiny_titan <modules folder> ...

Each argument is `full` (the base model's own attention), `segmented` (Titan layers, memory off),
`init` (Titan's initial modules) or a modules folder. --base names the base model folder.
"""

from __future__ import annotations

import argparse
import random

import torch

from memexp.backbones import load_backbone
from memexp.core.schema import ASSETS_DIR
from memexp.embedded.niah_text import niah_text, stream
from memexp.methods.titan.config import TitanConfig
from memexp.methods.titan.retrofit import retrofit

SEGMENT = 512
PROBE_SEED = 99  # its own training-style streams, apart from the recipes' seeds and RULER's


def backbone(base: str, which: str):
    bb = load_backbone({"name": "tiny_llama_niah", "arch": "llama", "pretrained": base, "dtype": "float32"})
    if which != "full":
        modules = retrofit(bb, TitanConfig(layers=bb.config.num_hidden_layers, segment_length=SEGMENT,
                                           test_batch=SEGMENT, memory=which != "segmented"))
        if which not in ("init", "segmented"):
            modules.load(which)
    return bb


def examples(tok, n: int) -> list[tuple[list[int], list[int], int]]:
    """(true ids, counterfactual ids, answer start) of n sequences with the needle segments back."""
    out, i = [], 0
    while len(out) < n:
        rng = stream(PROBE_SEED, "probe", i)
        i += 1
        t = niah_text(tok, rng, rng.randint(6, 12), "ruler", note=False)
        if (t.needle_end - 1) // SEGMENT >= t.answer_start // SEGMENT or len(t.ids) > 4 * SEGMENT:
            continue
        other = "".join(random.Random(i).choice("0123456789") for _ in t.value)
        needle = tok.decode(t.ids[t.needle_start:t.needle_end]).replace(t.value, other)
        ids2 = t.ids[:t.needle_start] + tok.encode(needle) + t.ids[t.needle_end:]
        assert len(ids2) == len(t.ids)  # byte tokens: the same positions
        out.append((t.ids, ids2, t.answer_start))
    return out


def answer_loss(bb, ids: list[int], start: int) -> tuple[float, float]:
    """Mean cross entropy and token accuracy of ids[start:] given everything before."""
    with torch.no_grad():
        logits = bb.train_forward(torch.tensor([ids]))[0].float()
    logp = torch.log_softmax(logits[start - 1:-1], -1)
    target = torch.tensor(ids[start:])
    return -logp.gather(1, target[:, None]).mean().item(), (logp.argmax(-1) == target).float().mean().item()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--base", default=str(ASSETS_DIR / "tiny_llama_niah"))
    ap.add_argument("--examples", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for which in args.models:
        bb = backbone(args.base, which)
        rows = [(answer_loss(bb, a, s), answer_loss(bb, b, s)[0]) for a, b, s in examples(bb.tokenizer, args.examples)]
        loss = sum(r[0][0] for r in rows) / len(rows)
        acc = sum(r[0][1] for r in rows) / len(rows)
        delta = sum(r[1] - r[0][0] for r in rows) / len(rows)
        print(f"{which}: answer loss {loss:.3f}, token accuracy {acc:.3f}, delta {delta:+.4f} nats", flush=True)


if __name__ == "__main__":
    main()
