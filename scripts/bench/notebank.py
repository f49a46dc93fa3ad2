"""NoteBank-TF wall time against Plain, and routing time over a paper-sized archive.

    python scripts/bench/notebank.py                       # tiny_gdn_random, 4K/16K/64K
    python scripts/bench/notebank.py --backbone gdn --lengths 4096 65536 --kernels triton

1. End to end (the paper's App. C.5 protocol, scaled down): for each context length, Plain
   and NoteBank read the same context and answer the same question generating exactly
   `--new-tokens` tokens (stopping disabled); NoteBank's time includes writing, probing,
   routing and replay. One warm-up, then `--repeats` timed runs alternating the method
   order; medians and the NoteBank / Plain ratio are printed.
2. Routing: `route_votes` alone on random addresses of `--notes` x `--channels` x `--address-dim`
   against a `--question-tokens` question, and NoteBank's probe + route (question forward with
   the observer, then voting) on the backbone with an archive of `--notes` notes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from memexp.backbones import load_backbone
from memexp.backbones.base import Backbone
from memexp.core.types import Question
from memexp.kernels.dispatch import set_kernels
from memexp.kernels.routing import route_votes
from memexp.methods.base import Memory
from memexp.methods.notebank.archive import Archive
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.notebank.method import NoteBank
from memexp.methods.plain.config import PlainConfig
from memexp.methods.plain.method import Plain

WORDS = ("the grass is green and the sky is blue while rivers run past old stone walls under a quiet "
         "moon as people talk about markets music weather and the long road home").split()


def context_ids(backbone: Backbone, length: int, seed: int = 0) -> list[int]:
    """`length` token ids of seeded sentence-like text with a planted fact in the middle."""
    rng = random.Random(seed)
    tok = backbone.tokenizer
    ids = tok.encode("", add_bos=True)
    fact = tok.encode(" The special magic number is 4721.")
    while len(ids) < length:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize()
        ids += tok.encode(" " + sentence + ".")
        if len(ids) >= length // 2 and fact:
            ids, fact = ids + fact, []
    return ids[:length]


def run_once(method, backbone: Backbone, context: list[int], question_ids: list[int], question: Question) -> float:
    t0 = time.perf_counter()
    memory = method.read(backbone, context)
    method.answer(backbone, memory, question_ids, question, stop=[])
    _sync()
    return time.perf_counter() - t0


def bench_end_to_end(backbone: Backbone, lengths: list[int], repeats: int, new_tokens: int, cfg: NoteBankConfig) -> None:
    tok = backbone.tokenizer
    question = Question("bench", "What is the special magic number? Answer:", ["4721"], "string_match", new_tokens)
    question_ids = tok.encode(question.prompt)
    methods = {"plain": Plain(PlainConfig()), "notebank": NoteBank(cfg)}
    print(f"\nend to end: {backbone.name}, {new_tokens} generated tokens, median of {repeats}")
    print(f"{'tokens':>8} {'plain s':>9} {'notebank s':>11} {'ratio':>7} {'notes':>6}  notebank stages (s)")
    for length in lengths:
        context = context_ids(backbone, length)
        for method in methods.values():
            run_once(method, backbone, context, question_ids, question)
        times = {name: [] for name in methods}
        for r in range(repeats):
            order = list(methods) if r % 2 == 0 else list(methods)[::-1]
            for name in order:
                times[name].append(run_once(methods[name], backbone, context, question_ids, question))
        memory = methods["notebank"].read(backbone, context)
        answer = methods["notebank"].answer(backbone, memory, question_ids, question, stop=[])
        stages = {**memory.seconds, **answer.seconds}
        plain, notebank = statistics.median(times["plain"]), statistics.median(times["notebank"])
        stage_text = " ".join(f"{k}={v:.4f}" for k, v in stages.items())
        print(f"{length:>8} {plain:>9.3f} {notebank:>11.3f} {notebank / plain:>7.3f} {memory.stats['notes']:>6}  "
              f"{stage_text}")


def synthetic_archive(notes: int, channels: int, address_dim: int, device: torch.device) -> Archive:
    lengths = torch.full((notes,), 64, dtype=torch.int64)
    starts = torch.arange(notes, dtype=torch.int64) * 256
    spans = torch.stack([torch.arange(notes), starts, starts + lengths], dim=1)
    addresses = torch.randn(notes, channels, address_dim, device=device).to(torch.bfloat16)
    return Archive(addresses, torch.randint(0, 200, (notes * 64,), dtype=torch.int32), spans)


def timed(fn, repeats: int) -> float:
    fn()
    _sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def bench_routing(backbone: Backbone, notes: int, channels: int, address_dim: int, question_tokens: int,
                  repeats: int, cfg: NoteBankConfig) -> None:
    device = backbone.device
    addresses = torch.randn(notes, channels, address_dim, device=device).to(torch.bfloat16)
    queries = torch.randn(question_tokens, channels, address_dim, device=device).to(torch.bfloat16)
    route_only = timed(lambda: route_votes(addresses, queries), repeats)

    nb = NoteBank(cfg)
    state = backbone.init_state()
    backbone.forward(state, context_ids(backbone, 1024))
    archive = synthetic_archive(notes, len(backbone.channels), cfg.address_dim or backbone.channels[0].d_k, device)
    memory = Memory(state=state, context_len=1024, extra=archive)
    tok = backbone.tokenizer
    question_ids = (tok.encode(" What is the special magic number mentioned in the long text above? " * 8))[:question_tokens]
    question = Question("bench", "", [], "string_match", 1)
    probes, routes = [], []
    for _ in range(repeats + 1):
        answer = nb.answer(backbone, memory, question_ids, question, stop=[])
        probes.append(answer.seconds["probe"])
        routes.append(answer.seconds["route"])
    probe, route = statistics.median(probes[1:]), statistics.median(routes[1:])
    j = len(backbone.channels)
    print(f"\nrouting: {notes} notes, question of {len(question_ids)} tokens, d_rho {address_dim}, median of {repeats}")
    rows = [(f"route_votes only, {channels} channels", route_only),
            (f"probe on {backbone.name}, {j} channels", probe),
            (f"route stage on {backbone.name}, {j} channels", route)]
    if j == channels:
        rows.append(("probe + route, measured", probe + route))
    else:
        rows.append((f"probe + route, estimated ({j}-channel probe + {channels}-channel route_votes)", probe + route_only))
    for label, seconds in rows:
        print(f"  {label:<72} {seconds * 1e3:9.3f} ms")
    print(f"  ratio probe + route / route_votes only: {rows[-1][1] / route_only:.2f}")


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", default="tiny_gdn_random", help="a conf/backbone name")
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384, 65536])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--chunk-size", type=int, default=512)
    parser.add_argument("--replay-budget", type=int, default=2)
    parser.add_argument("--notes", type=int, default=4096)
    parser.add_argument("--channels", type=int, default=192)
    parser.add_argument("--address-dim", type=int, default=16)
    parser.add_argument("--question-tokens", type=int, default=64)
    parser.add_argument("--kernels", default="auto", choices=("auto", "triton", "torch"))
    args = parser.parse_args()

    set_kernels(args.kernels)
    backbone = load_backbone(args.backbone)
    cfg = NoteBankConfig(chunk_size=args.chunk_size, replay_budget=args.replay_budget, address_dim=args.address_dim)
    print(f"backbone {backbone.name} on {backbone.device} ({backbone.dtype}), {len(backbone.channels)} channels, "
          f"kernels={args.kernels}, torch threads={torch.get_num_threads()}")
    with torch.inference_mode():
        bench_end_to_end(backbone, args.lengths, args.repeats, args.new_tokens, cfg)
        bench_routing(backbone, args.notes, args.channels, args.address_dim, args.question_tokens, args.repeats, cfg)


if __name__ == "__main__":
    main()
