"""Measured latency and peak memory, Plain vs NoteBank (NoteBank paper, App. C.5), and with
method=infllm Table 7's Transformer rows (Full, SW4K, InfLLM; `transformer_rows`).

Protocol: per input and method one warm-up run, then `repeats` (3) timed runs with the method
order alternated; a method's figure is the mean over inputs of the per-input medians. A run
is `method.read(context ids)` (NoteBank builds its archive there, anew every run) followed by
`method.answer(question ids)` generating exactly `new_tokens` (32) tokens with stopping
disabled (stop=[]): prompt processing, writing, probing, routing, replay and generation, and
any tokenisation inside the method. Model loading, the first tokenisation, warm-up and result
serialisation are outside the timed region. Peak memory is reset before each timed run and
read after it: `torch.cuda.max_memory_allocated` on CUDA (absolute, weights included), the
process's peak RSS on CPU.

    python -m memexp latency backbone=tiny_gdn_random lengths=4096,16384,65536 [--json]

(the command itself is memexp.cli.latency)
"""

from __future__ import annotations

import resource
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from memexp.backbones.base import Backbone
from memexp.core.types import Question
from memexp.methods.base import Answer, Method

PAPER_TASKS = ("niah_single_2", "niah_multiquery", "niah_multivalue")  # example 0 of each (App. C.5)


@dataclass
class LatencyInput:
    """One pre-tokenised input: tokenisation happens before timing."""

    name: str
    context_ids: list[int]
    question_ids: list[int]
    prompt: str = ""  # the question text, for routers that read it (BM25)


class PeakMemory:
    """Peak memory between `reset()` and `peak()`: the CUDA allocator's maximum on a CUDA
    device, otherwise the process's peak RSS (VmHWM, reset through /proc/self/clear_refs;
    where that is not allowed, the peak since the process started)."""

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device(device)
        if self.device.type == "cuda":
            self.kind = "cuda_max_memory_allocated"
        else:
            self.kind = "cpu_peak_rss" if self._clear_rss_peak() else "cpu_peak_rss_since_start"

    def reset(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self.kind == "cpu_peak_rss":
            self._clear_rss_peak()

    def peak(self) -> int:
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    @staticmethod
    def _clear_rss_peak() -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False


def run_once(backbone: Backbone, method: Method, inp: LatencyInput, new_tokens: int) -> Answer:
    """One complete run: read the context, answer the question with exactly `new_tokens` tokens.
    The answer's `seconds` hold every stage of the run, the read's (e.g. prefill_write) first."""
    memory = method.read(backbone, inp.context_ids)
    question = Question(id=inp.name, prompt=inp.prompt, references=[], metric="none", max_new_tokens=new_tokens)
    answer = method.answer(backbone, memory, inp.question_ids, question, stop=[])
    if len(answer.ids) != new_tokens:
        raise RuntimeError(f"{method.name} generated {len(answer.ids)} tokens with stopping disabled, not {new_tokens}")
    answer.seconds = {**memory.seconds, **answer.seconds}
    return answer


def _order(names: list[str], k: int) -> list[str]:
    return names if k % 2 == 0 else names[::-1]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_latency(backbone: Backbone, methods: dict[str, Method], inputs: list[LatencyInput], new_tokens: int = 32,
                    repeats: int = 3, clock: Callable[[], float] = time.perf_counter,
                    memory: PeakMemory | None = None) -> dict:
    """Time every method on every input by the App. C.5 protocol.

    Returns {'methods': {name: {'seconds': mean of per-input medians, 'peak_bytes': the
    largest peak of any timed run, 'runs': {input: [seconds...]}, 'peaks': {input: [bytes...]},
    'stats': the method's figures (Answer.stats) of its last timed run}},
    'new_tokens', 'repeats', 'memory': how peaks were measured}.
    """
    memory = memory or PeakMemory(backbone.device)
    names = list(methods)
    runs = {m: {inp.name: [] for inp in inputs} for m in names}
    peaks = {m: {inp.name: [] for inp in inputs} for m in names}
    stats: dict[str, dict] = {m: {} for m in names}  # the method's figures of its last timed run
    for k, inp in enumerate(inputs):
        for name in _order(names, k):
            run_once(backbone, methods[name], inp, new_tokens)
        for r in range(repeats):
            for name in _order(names, k + r + 1):
                memory.reset()
                _sync(backbone.device)
                t0 = clock()
                answer = run_once(backbone, methods[name], inp, new_tokens)
                _sync(backbone.device)
                runs[name][inp.name].append(clock() - t0)
                stats[name] = answer.stats
                peaks[name][inp.name].append(memory.peak())
    return {
        "methods": {
            m: {"seconds": statistics.fmean(statistics.median(v) for v in runs[m].values()),
                "peak_bytes": max(p for v in peaks[m].values() for p in v),
                "runs": runs[m], "peaks": peaks[m], "stats": stats[m]}
            for m in names
        },
        "new_tokens": new_tokens,
        "repeats": repeats,
        "memory": memory.kind,
    }


def ratio_rows(results: dict[int, dict], base: str = "plain", other: str = "notebank") -> list[dict]:
    """Per length: both methods' seconds and peaks and other / base."""
    rows = []
    for length, res in results.items():
        a, b = res["methods"][base], res["methods"][other]
        rows.append({"length": length, f"{base}_seconds": a["seconds"], f"{other}_seconds": b["seconds"],
                     "latency_ratio": b["seconds"] / a["seconds"], f"{base}_peak_bytes": a["peak_bytes"],
                     f"{other}_peak_bytes": b["peak_bytes"], "peak_ratio": b["peak_bytes"] / a["peak_bytes"]})
    return rows


def format_ratio_table(rows: list[dict], memory_kind: str) -> str:
    head = f"{'length':>8}  {'Plain s':>9}  {'NoteBank s':>10}  {'ratio':>6}  {'Plain peak':>11}  {'NB peak':>11}  {'ratio':>6}"
    lines = [head]
    for r in rows:
        lines.append(f"{r['length']:>8,}  {r['plain_seconds']:>9.3f}  {r['notebank_seconds']:>10.3f}  "
                     f"{r['latency_ratio']:>6.3f}  {r['plain_peak_bytes'] / 2**20:>7.1f} MiB  "
                     f"{r['notebank_peak_bytes'] / 2**20:>7.1f} MiB  {r['peak_ratio']:>6.3f}")
    lines.append(f"peak memory: {memory_kind}")
    return "\n".join(lines)


_WORDS = ("river stone lamp orchard quiet harbor violet engine paper winter copper meadow signal garden "
          "candle market silver forest window thunder ladder marble planet velvet").split()
_QUESTION = ("What is the special magic number for {key} mentioned in the provided text? "
             "The special magic number for {key} mentioned in the provided text is")


def synthetic_inputs(tokenizer, length: int, seed: int = 0) -> list[LatencyInput]:
    """One input of seeded random sentences cut to exactly `length` context tokens and a
    RULER-style question, for timing without a benchmark's data (content barely changes the
    work done)."""
    g = torch.Generator().manual_seed(seed + length)
    ids = tokenizer.encode("", add_bos=True)
    while len(ids) < length:
        words = [_WORDS[i] for i in torch.randint(len(_WORDS), (12,), generator=g).tolist()]
        ids += tokenizer.encode(" ".join(words).capitalize() + ". ")
    prompt = _QUESTION.format(key="quiet-harbor")
    return [LatencyInput(f"synthetic-{length}", ids[:length], tokenizer.encode(prompt), prompt)]


def ruler_inputs(tokenizer, length: int, tasks: tuple[str, ...] = PAPER_TASKS, bench_cfg=None) -> list[LatencyInput]:
    """Example 0 of each RULER task at `length`, tokenised here (outside timing)."""
    from dataclasses import replace

    from memexp.benchmarks import build_benchmark
    from memexp.benchmarks.ruler.config import RulerConfig

    cfg = replace(bench_cfg or RulerConfig(), tasks=list(tasks), lengths=[length], num_samples=1)
    out = []
    for ex in build_benchmark(cfg).examples(tokenizer):
        q = ex.questions[0]
        out.append(LatencyInput(f"{ex.task}-{length}", tokenizer.encode(ex.context, add_bos=True),
                                tokenizer.encode(q.prompt), q.prompt))
    return out


def titan_layer_rows(cfg, layer_counts: list[int], lengths: list[int], make_inputs, new_tokens: int,
                     repeats: int) -> list[dict]:
    """Titan-Llama's Fig. 4: Plain on the unmodified backbone beside Titan with k converted layers
    (method.* of the run config, layers = k), each on its own freshly loaded backbone (a retrofit
    changes the backbone in place), timed by the same protocol at every length; one row per
    (length, k) with Titan / Plain ratios. Prefill alone: new_tokens=1."""
    from dataclasses import replace

    from memexp.backbones import load_backbone
    from memexp.methods import build_method
    from memexp.methods.plain.config import PlainConfig
    from memexp.methods.titan.config import TitanConfig, TitanSegmentedConfig

    # method=titan (or its segmented control) with its method.* fields; the defaults otherwise
    titan = cfg.method if cfg.method.name in (TitanConfig.name, TitanSegmentedConfig.name) else TitanConfig()
    per: dict[int, dict[str, dict]] = {n: {} for n in lengths}
    for name, method_cfg in [("plain", PlainConfig())] + [(k, replace(titan, layers=k)) for k in layer_counts]:
        backbone = load_backbone(cfg.backbone)
        method = build_method(method_cfg)
        method.prepare(backbone)
        for n in lengths:
            per[n][name] = measure_latency(backbone, {"m": method}, make_inputs(backbone.tokenizer, n), new_tokens,
                                           repeats)["methods"]["m"]
    return [{"length": n, "layers": k, "plain_seconds": per[n]["plain"]["seconds"],
             "titan_seconds": per[n][k]["seconds"], "latency_ratio": per[n][k]["seconds"] / per[n]["plain"]["seconds"],
             "plain_peak_bytes": per[n]["plain"]["peak_bytes"], "titan_peak_bytes": per[n][k]["peak_bytes"],
             "peak_ratio": per[n][k]["peak_bytes"] / per[n]["plain"]["peak_bytes"]}
            for n in lengths for k in layer_counts]


def transformer_rows(cfg, window: int, lengths: list[int], make_inputs, new_tokens: int, repeats: int) -> list[dict]:
    """Table 7 / Fig. 4c's Transformer rows (NoteBank paper, App. C.5): Full (Plain on the backbone
    as configured), SW<window> (Plain with backbone.window=<window>) and InfLLM (method.* of the run
    config), each on its own freshly loaded backbone (InfLLM converts it in place), timed by the same
    protocol at every length. Per length: seconds and peak bytes of each, and InfLLM's host KV bytes
    and blocks after its last timed run (Table 7's "CPU archive")."""
    from dataclasses import replace

    from memexp.backbones import load_backbone
    from memexp.methods import build_method
    from memexp.methods.plain.config import PlainConfig

    variants = [("full", replace(cfg.backbone, window=None), PlainConfig()),
                ("sw", replace(cfg.backbone, window=window), PlainConfig()),
                ("infllm", replace(cfg.backbone, window=None), cfg.method)]
    per: dict[int, dict[str, dict]] = {n: {} for n in lengths}
    for name, backbone_cfg, method_cfg in variants:
        backbone = load_backbone(backbone_cfg)
        method = build_method(method_cfg)
        method.prepare(backbone)
        for n in lengths:
            per[n][name] = measure_latency(backbone, {"m": method}, make_inputs(backbone.tokenizer, n), new_tokens,
                                           repeats)["methods"]["m"]
        del backbone, method
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    rows = []
    for n in lengths:
        row = {"length": n, "window": window}
        for name, _, _ in variants:
            row[f"{name}_seconds"], row[f"{name}_peak_bytes"] = per[n][name]["seconds"], per[n][name]["peak_bytes"]
        row["infllm_host_kv_bytes"] = per[n]["infllm"]["stats"]["infllm_host_kv_bytes"]
        row["infllm_blocks"] = per[n]["infllm"]["stats"]["infllm_blocks"]
        rows.append(row)
    return rows
