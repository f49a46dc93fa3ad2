"""Cost of switching LoRA adapters on and off against one question's answer time (issue 12).

    python scripts/bench/adapters.py                 # tiny_gdn, ~1K-token context, 16 generated tokens
    python scripts/bench/adapters.py --threads 2 --toggles 2000
    python scripts/bench/adapters.py --backbone tiny_gdn_words --method-adapter memexp/assets/tiny_gdn_words_lora/notebank

NoteBank-LoRA enters `adapters.enabled()` for replay and answering and leaves it after, once
per question, so the switch must be negligible next to answering. One process measures, side
by side: entering + leaving the context manager (median over many toggles), and answering one
question from a copy of the context state (question + 16 greedy tokens), adapters off and on.
With `--method-adapter <dir>` it also times NB-LoRA itself (issue 17): `NoteBank.answer` with that
adapter folder (probe, route, replay, question, 16 tokens) against the switch the method makes
(`method.adapter.on(backbone)`, entered and left once per question).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from memexp.adapters import LoRAConfig, attach_lora
from memexp.backbones import load_backbone

TARGETS = ["*.attn.q_proj", "*.attn.k_proj", "*.attn.v_proj", "*.attn.o_proj", "*.mlp.*_proj"]


def context_ids(tokenizer, n_tokens: int) -> list[int]:
    text = " ".join(f"Note {i}: the code word for box {i} is {i * 37 % 1000}." for i in range(400))
    return tokenizer.encode(text)[:n_tokens]


def time_answer(backbone, state, question: list[int], new_tokens: int, repeats: int) -> float:
    """Median seconds to answer from a copy of `state` (the copy included, as the runner does)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        backbone.generate(state.clone(), question, new_tokens, stop=[])
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_toggle(adapters, toggles: int) -> float:
    """Median seconds of one enter + leave of `adapters.enabled()`, over batches of 100."""
    batches = []
    for _ in range(max(toggles // 100, 1)):
        t0 = time.perf_counter()
        for _ in range(100):
            with adapters.enabled():
                pass
        batches.append((time.perf_counter() - t0) / 100)
    return statistics.median(batches)


def time_method(backbone, adapter: str, ids: list[int], question_text: str, new_tokens: int, repeats: int,
                toggles: int) -> tuple[float, float, int]:
    """(median NB-LoRA answer seconds, median seconds of one switch on + off, replay tokens)."""
    from memexp.core.compose import load_config
    from memexp.core.types import Question
    from memexp.methods import build_method

    cfg = load_config([f"backbone={backbone.name}", "method=notebank", f"method.adapter={adapter}"]).method
    method = build_method(cfg)
    method.prepare(backbone)
    memory = method.read(backbone, [backbone.tokenizer.bos_id, *ids] if backbone.tokenizer.bos_id is not None else ids)
    question = Question("q", question_text, [""], "string_match_all", new_tokens, min_new_tokens=new_tokens)
    q_ids = backbone.tokenizer.encode(question_text)
    method.answer(backbone, memory, q_ids, question, stop=[])  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        answer = method.answer(backbone, memory, q_ids, question, stop=[])
        times.append(time.perf_counter() - t0)
    switch = time_toggle(_Slot(method.adapter, backbone), toggles)
    return statistics.median(times), switch, answer.tokens["replay"]


class _Slot:
    """`enabled()` over a method's adapter slot, so `time_toggle` times what the method enters."""

    def __init__(self, slot, backbone) -> None:
        self.slot, self.backbone = slot, backbone

    def enabled(self):
        return self.slot.on(self.backbone)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backbone", default="tiny_gdn")
    p.add_argument("--context-tokens", type=int, default=1024)
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--toggles", type=int, default=2000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--method-adapter", default=None, help="an adapter folder: also time NB-LoRA's answer")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    bb = load_backbone(args.backbone)
    lora = attach_lora(bb, LoRAConfig(targets=TARGETS, rank=args.rank, alpha=2.0 * args.rank))
    ids = context_ids(bb.tokenizer, args.context_tokens)
    question = bb.tokenizer.encode(" Question: what is the code word for box 123? Answer:")
    state = bb.init_state()
    bb.forward(state, ids)
    time_answer(bb, state, question, args.new_tokens, 1)  # warm-up

    answer_off = time_answer(bb, state, question, args.new_tokens, args.repeats)
    toggle = time_toggle(lora, args.toggles)
    with lora.enabled():
        answer_on = time_answer(bb, state, question, args.new_tokens, args.repeats)
    print(f"{args.backbone}: {len(ids)}-token context, {len(question)}-token question + {args.new_tokens} tokens; "
          f"{len(lora.names)} adapted projections, rank {args.rank}; threads {args.threads}")
    print("| | seconds | / answer (off) |\n|---|---:|---:|")
    print(f"| answer, adapters off | {answer_off:.4f} | 1 |")
    print(f"| answer, adapters on | {answer_on:.4f} | {answer_on / answer_off:.3f} |")
    print(f"| enter + leave `enabled()` | {toggle:.2e} | {toggle / answer_off:.2e} |")
    if args.method_adapter:
        nb, switch, replay = time_method(bb, args.method_adapter, ids, " Question: what is the code word for box 123? "
                                         "Answer:", args.new_tokens, args.repeats, args.toggles)
        print(f"| NB-LoRA answer ({replay} replay tokens, {args.new_tokens} new) | {nb:.4f} | {nb / answer_off:.3f} |")
        print(f"| NB-LoRA switch `method.adapter.on` | {switch:.2e} | {switch / nb:.2e} of NB-LoRA's answer |")


if __name__ == "__main__":
    main()
