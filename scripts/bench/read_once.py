"""Wall time of one MemoryAgentBench-shaped example (a long memorised context, k questions):
memexp's protocol, which reads the context once and answers every question from a copy of
the state, against re-reading the context for every question.

    python scripts/bench/read_once.py                      # tiny_gdn_random, ~262K tokens, 10 questions
    python scripts/bench/read_once.py --context-tokens 32768 --questions 4 --json

Both arms run the same Plain method on the same example (built by the MemoryAgentBench
benchmark from a synthetic FactConsolidation row) and must produce the same answers. With k
questions the speed-up tends to k as the context grows: it is (R + A) k / (R + k A) for a
read time R and an answer time A, so 9x at k = 10 needs R >= 80 A.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from memexp.backbones import load_backbone
from memexp.benchmarks.datasets import SourceRow
from memexp.benchmarks.memoryagentbench.benchmark import MemoryAgentBench
from memexp.benchmarks.memoryagentbench.config import MemoryAgentBenchConfig
from memexp.benchmarks.memoryagentbench.tasks import TASKS
from memexp.methods.plain.method import Plain


def synthetic_row(tokenizer, context_tokens: int, questions: int) -> dict:
    """A FactConsolidation-like row whose context is about `context_tokens` tokens long."""
    fact = "{i}. The value of item {i} is {v}."
    sample = " ".join(fact.format(i=i, v=i * 7 % 1000) for i in range(100))
    per_fact = max(len(tokenizer.encode(sample)) / 100, 1e-6)
    n = max(int(context_tokens / per_fact), questions)
    context = " ".join(fact.format(i=i, v=i * 7 % 1000) for i in range(n))
    step = max(n // questions, 1)
    return {"context": context,
            "questions": [f"what is the value of item {j * step}?" for j in range(questions)],
            "answers": [[str(j * step * 7 % 1000)] for j in range(questions)],
            "metadata": {"source": "factconsolidation_sh_262k"}}


def read_once(backbone, method, context_ids, questions):
    """(seconds, answers, seconds of the one read)."""
    t0 = time.perf_counter()
    memory = method.read(backbone, context_ids)
    t_read = time.perf_counter() - t0
    answers = [method.answer(backbone, memory, ids, q).ids for ids, q in questions]
    return time.perf_counter() - t0, answers, t_read


def reread(backbone, method, context_ids, questions):
    """(seconds, answers, seconds of the first read)."""
    t0 = time.perf_counter()
    answers, t_read = [], None
    for ids, q in questions:
        t1 = time.perf_counter()
        memory = method.read(backbone, context_ids)
        t_read = t_read if t_read is not None else time.perf_counter() - t1
        answers.append(method.answer(backbone, memory, ids, q).ids)
    return time.perf_counter() - t0, answers, t_read


def fastest(runs):
    return min(runs, key=lambda run: run[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="tiny_gdn_random")
    parser.add_argument("--context-tokens", type=int, default=262144,
                        help="about this many context tokens (FactConsolidation 262K)")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per arm; the fastest counts")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--target", type=float, default=9.0, help="speed-up the check asks for")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    backbone = load_backbone(args.backbone)
    tok = backbone.tokenizer
    bench = MemoryAgentBench(MemoryAgentBenchConfig(chunker="approximate"))
    row = SourceRow("synthetic", 0, synthetic_row(tok, args.context_tokens, args.questions))
    example = bench.example(TASKS["factconsolidation_sh_262k"], row, tok)
    context_ids = tok.encode(example.context, add_bos=True)
    questions = [(tok.encode(q.prompt), q) for q in example.questions]
    method = Plain()

    read_once(backbone, method, context_ids[:256], questions[:1])  # warm-up: allocator, kernels
    once_runs, reread_runs = [], []
    for _ in range(args.repeats):  # alternate the arms so a busy machine slows both alike
        once_runs.append(read_once(backbone, method, context_ids, questions))
        reread_runs.append(reread(backbone, method, context_ids, questions))
    t_once, answers_once, t_read = fastest(once_runs)
    t_reread, answers_reread, _ = fastest(reread_runs)
    result = {
        "backbone": args.backbone,
        "context_tokens": len(context_ids),
        "questions": len(questions),
        "question_tokens": sum(len(ids) for ids, _ in questions),
        "generated_tokens": sum(len(a) for a in answers_once),
        "read_s": round(t_read, 3),
        "answer_s_per_question": round((t_once - t_read) / len(questions), 4),
        "read_once_s": round(t_once, 3),
        "reread_s": round(t_reread, 3),
        "speedup": round(t_reread / t_once, 2),
        "same_answers": answers_once == answers_reread,
        "target": args.target,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['backbone']}: context {result['context_tokens']} tokens, {result['questions']} questions "
              f"({result['question_tokens']} question + {result['generated_tokens']} generated tokens)")
        print(f"  one read {t_read:.3f} s, one answer {result['answer_s_per_question']:.4f} s")
        print(f"  read once, answer each from a copy: {t_once:8.3f} s")
        print(f"  re-read the context per question:  {t_reread:8.3f} s")
        print(f"  speed-up {result['speedup']:.2f}x (target >= {args.target:g}x), same answers: "
              f"{result['same_answers']}")
    return 0 if result["same_answers"] and result["speedup"] >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
