"""Memory of Titan-Llama's training loss and decode, the figures docs/benchmarks.md quotes.

    python scripts/probe/titan_memory_at_size.py loss [--length 2048] [--vocab 32000] [--hidden 256]
    python scripts/probe/titan_memory_at_size.py decode

loss: the next-token loss of one sequence, forward and backward, in two forms: `whole` (what
recipe=titan_llama did before: `train_forward`'s logits for every position, then the cross entropy
in 512-position pieces) and `chunked` (memexp.training.loss: from the hidden states, one chunk's
logits at a time, checkpointed). Each form runs in its own process; printed: the process's peak
resident memory above its state after the inputs were made (ru_maxrss), and the largest tensor an
operation returned.

decode: the elements of the new tensors one decoded token allocates in a Titan memory at
Llama-3.2-1B's shapes (8 KV heads of 64, 32 query heads, chunk 512), at several fills of the
pending chunk; run it with PYTHONPATH on an older checkout to see the form it replaced.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

IGNORE = -100
PIECE = 512  # the previous form's cross-entropy piece


class Largest(TorchDispatchMode):
    """The most elements, and the sum of elements, of the new tensors operations return."""

    def __init__(self) -> None:
        super().__init__()
        self.largest, self.allocated = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not any(r.alias_info is not None for r in func._schema.returns):  # views and in-place writes allocate none
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    self.largest = max(self.largest, t.numel())
                    self.allocated += t.numel()
        return out


def whole_form(hidden, head, labels):
    """The previous recipe's loss: logits of every position, then the cross entropy in pieces."""
    logits, targets = head(hidden)[:, :-1], labels[:, 1:]
    total = logits.new_zeros((), dtype=torch.float32)
    for s in range(0, targets.shape[1], PIECE):
        piece = logits[:, s:s + PIECE].float()
        total = total + F.cross_entropy(piece.flatten(0, 1), targets[:, s:s + PIECE].flatten(), ignore_index=IGNORE,
                                        reduction="sum")
    return total / (targets != IGNORE).sum()


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def one_form(form: str, length: int, vocab: int, hidden_size: int) -> dict:
    from memexp.training.loss import next_token_loss

    torch.manual_seed(0)
    hidden = torch.randn(1, length, hidden_size, requires_grad=True)
    head = torch.nn.Linear(hidden_size, vocab, bias=False)
    labels = torch.randint(0, vocab, (1, length))
    base = rss_mib()
    with Largest() as seen:
        loss = whole_form(hidden, head, labels) if form == "whole" else next_token_loss(hidden, head, labels)[0]
        loss.backward()
    return {"form": form, "peak_rss_above_inputs_mib": round(rss_mib() - base, 1),
            "largest_tensor_mib": round(seen.largest * 4 / 2**20, 1), "loss": round(loss.item(), 4)}


@torch.no_grad()
def decode() -> list[dict]:
    from memexp.methods.titan.memory import NeuralMemory

    hk, d, h, chunk = 8, 64, 32, 512
    torch.manual_seed(0)
    memory = NeuralMemory(hk, d, chunk, 2 * chunk, 1.0)
    state = memory.init_state(1, torch.device("cpu"))

    def qkv(t):
        return torch.randn(1, t, h, d), torch.randn(1, t, hk, d), torch.randn(1, t, hk, d)

    position = 2 * chunk + 1
    memory(*qkv(position), state, 0)
    rows = []
    for _ in range(chunk - 3):
        with Largest() as seen:
            memory(*qkv(1), state, position)
        position += 1
        fill = position % chunk
        if fill in (8, 256, 510):
            rows.append({"pending_tokens_before": fill - 1, "elements_allocated": seen.allocated,
                         "largest_tensor_elements": seen.largest})
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("loss", "decode"))
    p.add_argument("--length", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--form", choices=("whole", "chunked"), help=argparse.SUPPRESS)  # one form, in this process
    a = p.parse_args(argv)
    if a.what == "decode":
        for row in decode():
            print(json.dumps(row))
        return
    if a.form:
        print(json.dumps(one_form(a.form, a.length, a.vocab, a.hidden)))
        return
    for form in ("whole", "chunked"):  # each in a fresh process: ru_maxrss only ever grows
        out = subprocess.run([sys.executable, __file__, "loss", "--form", form, "--length", str(a.length), "--vocab",
                              str(a.vocab), "--hidden", str(a.hidden)], capture_output=True, text=True, check=True)
        print(out.stdout.strip())


if __name__ == "__main__":
    main()
