"""memexp as an lm-evaluation-harness model (`--model memexp`): generation only, read-once.

`generate_until` receives every generation request of an evaluation at once. It cuts each
prompt into context and question (memexp.lmeval.split), groups the requests by context, reads
each context ONCE with the memexp Method and answers every request of the group from a copy
of the retained state (`Method.answer` never mutates the memory), like memexp's own runner.
Decoding is greedy; lm-eval's `until` strings end it at the last token of each string (as
memexp's benchmarks stop, `memexp.run.runner.answer_stop_ids`) and the text is cut at the first
stop string, as lm-eval's HF model does. Nothing is truncated: a request longer than
`max_length` tokens is an error. Each answer's memexp record (tokens, seconds, method figures)
is appended to the run folder's answers.jsonl; `memexp.lmeval.records.finish` scores them
with lm-eval's per-sample metrics.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from lm_eval.api.model import LM
from lm_eval.models.utils import normalize_gen_kwargs, postprocess_generated_text
from tqdm import tqdm

from memexp.core.schema import ConfigError
from memexp.core.types import Example, Question
from memexp.lmeval.config import config_dict, load, run_dir
from memexp.lmeval.records import ANSWERS, PENDING, append_answer
from memexp.lmeval.split import split_prompt

DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's HF model's default when a task names none
# what greedy decoding reads (until, max_gen_toks, do_sample=false) and what it may ignore
# (sampling parameters, which have no effect with do_sample=false); anything else changes decoding
GEN_KWARGS = ("until", "max_gen_toks", "do_sample", "temperature", "top_p", "top_k")
UNSUPPORTED = ("loglikelihood and loglikelihood_rolling (multiple-choice and perplexity tasks) are not supported: "
               "memexp's methods read a context once and generate; choose generate_until tasks")


@dataclass
class _Request:
    """One generation request, cut and checked before any context is read."""

    task: str
    doc_id: int
    idx: int
    length: int | str
    context: str
    question: str
    max_gen_toks: int
    until: list[str]


class MemexpLM(LM):
    """`--model_args backbone=tiny_gdn,method=notebank,method.router=bm25,split=auto,...`
    (memexp.lmeval.config). The config is validated before any model loads."""

    def __init__(self, **model_args: Any) -> None:
        super().__init__()
        self.cfg, self.args = load(model_args)
        self.run_dir = run_dir(self.cfg, self.args)
        self.config = config_dict(self.cfg, self.args)
        self._load()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # answers of an earlier evaluation in the same folder would join this one's samples
        (self.run_dir / ANSWERS).unlink(missing_ok=True)
        print(f"[memexp] lm-eval run folder: {self.run_dir}", file=sys.stderr)

    def _load(self) -> None:
        import torch

        from memexp.backbones import load_backbone
        from memexp.kernels.dispatch import set_kernels
        from memexp.methods import build_method
        from memexp.run.runner import record_costs_fn

        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        set_kernels(self.cfg.kernels)
        self.backbone = load_backbone(self.cfg.backbone)
        self.method = build_method(self.cfg.method)
        self.method.prepare(self.backbone)
        self.costs = record_costs_fn(self.cfg, self.backbone)

    def loglikelihood(self, requests):
        raise ConfigError(f"--model memexp: {UNSUPPORTED} (task {_task_of(requests)})")

    def loglikelihood_rolling(self, requests):
        raise ConfigError(f"--model memexp: {UNSUPPORTED} (task {_task_of(requests)})")

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        plans = [self._plan(r) for r in requests]  # every split error before the first read
        by_context: dict[str, list[int]] = defaultdict(list)
        for i, p in enumerate(plans):
            by_context[p.context].append(i)
        out: list[str] = [""] * len(requests)
        bar = tqdm(total=len(requests), disable=disable_tqdm or not self.cfg.progress, file=sys.stderr,
                   desc="memexp generate_until")
        for context, indices in by_context.items():
            answered: dict[tuple, str] = {}  # lm-eval's repeats pass one request K times: greedy, answered once
            for i, text in self._answer_group(context, [plans[i] for i in indices], answered):
                out[indices[i]] = text
                self.cache_hook.add_partial("generate_until", requests[indices[i]].args, text)
                bar.update(1)
        bar.close()
        return out

    def _plan(self, request) -> _Request:
        prompt, gen_kwargs = request.args
        task = request.task_name or "?"
        kwargs = normalize_gen_kwargs(gen_kwargs or {}, DEFAULT_MAX_GEN_TOKS)
        if kwargs.get("do_sample"):
            raise ConfigError(f"task {task}: do_sample=true: memexp decodes greedily "
                              f"(--gen_kwargs do_sample=false,temperature=0)")
        other = sorted(set(kwargs) - set(GEN_KWARGS))
        if other:
            raise ConfigError(f"task {task}: generation_kwargs {', '.join(other)}: memexp's greedy decoding "
                              f"takes {', '.join(GEN_KWARGS)}")
        context, question = split_prompt(prompt, request.doc or {}, self.args.split, task)
        doc = request.doc or {}
        length = doc["max_length"] if isinstance(doc.get("max_length"), int) else "all"  # RULER's length bucket
        return _Request(task, request.doc_id, request.idx, length, context, question,
                        kwargs["max_gen_toks"], list(kwargs.get("until") or []))

    def _answer_group(self, context: str, group: list[_Request], answered: dict):
        """Read `context` once; yield (position in group, text) for each request."""
        tok = self.backbone.tokenizer
        context_ids = tok.encode(context, add_bos=True)
        questions = [tok.encode(p.question) for p in group]
        for p, q_ids in zip(group, questions):
            self._check_length(p, len(context_ids), len(q_ids))
        t0 = time.perf_counter()
        memory = self.method.read(self.backbone, context_ids)
        read_seconds = time.perf_counter() - t0
        for i, (p, q_ids) in enumerate(zip(group, questions)):
            key = (p.task, p.doc_id, p.idx)
            if key not in answered:
                answered[key] = self._answer(p, q_ids, memory, len(context_ids), read_seconds)
            yield i, answered[key]

    def _answer(self, p: _Request, q_ids: list[int], memory, context_tokens: int, read_seconds: float) -> str:
        from memexp.run.runner import answer_record, answer_stop_ids

        tok = self.backbone.tokenizer
        example_id = f"{p.task}/{p.doc_id}"
        q = Question(id=f"{example_id}/{p.idx}", prompt=p.question, references=[], metric="lm-eval",
                     max_new_tokens=p.max_gen_toks, stop=p.until)
        stop = answer_stop_ids(tok, q)
        ans = self.method.answer(self.backbone, memory, q_ids, q, stop)
        ended = set(tok.stop_ids) if stop is None else set(stop)
        gen = ans.ids[:-1] if ans.ids and ans.ids[-1] in ended else ans.ids  # the id that ended it
        text = postprocess_generated_text(tok.decode(gen), p.until, None)
        ex = Example(id=example_id, task=p.task, length=p.length, context="", questions=[q])
        rec = answer_record(ex, q, text, 0.0, context_tokens, read_seconds, memory, ans)
        rec.metric = PENDING  # lm-eval scores it; `finish` writes that score, or leaves the record out
        rec.costs = self.costs(rec.tokens, memory.stats)
        append_answer(self.run_dir, rec)
        return text

    def _check_length(self, p: _Request, context_tokens: int, question_tokens: int) -> None:
        total = context_tokens + question_tokens + p.max_gen_toks
        if self.args.max_length is not None and total > self.args.max_length:
            raise ConfigError(f"task {p.task} doc {p.doc_id}: {context_tokens} context + {question_tokens} question "
                              f"+ {p.max_gen_toks} generated tokens = {total} > max_length={self.args.max_length}; "
                              f"memexp never truncates: raise max_length or choose shorter tasks")


def _task_of(requests) -> str:
    names = sorted({r.task_name for r in requests if r.task_name})
    return ", ".join(names) or "?"
