"""`python -m memexp latency`: measured latency and peak memory side by side (memexp.run.latency
holds the protocol): Plain vs NoteBank (App. C.5), Plain vs Titan-Llama per converted layers (Fig. 4),
and the Transformer rows of Table 7 with method=infllm."""

from __future__ import annotations

import json
import sys

import torch

from memexp.run.latency import (
    PAPER_TASKS,
    LatencyInput,
    format_ratio_table,
    measure_latency,
    ratio_rows,
    ruler_inputs,
    synthetic_inputs,
    titan_layer_rows,
    transformer_rows,
)


def _pop(argv: list[str], key: str, default: str) -> str:
    for a in list(argv):
        if a.startswith(key + "="):
            argv.remove(a)
            return a.split("=", 1)[1]
    return default


def main(argv: list[str]) -> int:
    """`python -m memexp latency [hydra overrides] [lengths=4096,16384,65536] [repeats=3]
    [new_tokens=32] [inputs=ruler|synthetic] [titan_layers=1,2,4,...] [sw_window=4096] [--json]`: Plain
    vs NoteBank (method.* overrides configure NoteBank) side by side at each length, as NoteBank / Plain
    ratios; with titan_layers, Plain vs Titan-Llama with each number of converted layers (Fig. 4;
    method=titan and its method.* configure it); with method=infllm, the Transformer rows of Table 7:
    Full, SW<sw_window> and InfLLM (`transformer_rows`)."""
    from memexp.backbones import load_backbone
    from memexp.cli.help import reject_flags
    from memexp.core.compose import load_config
    from memexp.core.schema import ConfigError
    from memexp.kernels.dispatch import set_kernels
    from memexp.methods import build_method
    from memexp.methods.notebank.config import NoteBankConfig
    from memexp.methods.plain.config import PlainConfig
    from memexp.run.checks import check_model_config

    argv = list(argv)
    as_json = "--json" in argv
    if as_json:
        argv.remove("--json")
    lengths_text = _pop(argv, "lengths", "4096,16384,65536")
    try:
        lengths = [int(float(x)) for x in lengths_text.split(",")]
    except ValueError:
        raise ConfigError(f"lengths={lengths_text!r}: must be integers separated by commas, e.g. lengths=1024,4096") from None
    counts = {"repeats": _pop(argv, "repeats", "3"), "new_tokens": _pop(argv, "new_tokens", "32")}
    for name, text in counts.items():
        if not text.lstrip("-").isdigit():
            raise ConfigError(f"{name}={text!r}: must be an integer >= 1")
    repeats, new_tokens = int(counts["repeats"]), int(counts["new_tokens"])
    for name, values in (("lengths", lengths), ("repeats", [repeats]), ("new_tokens", [new_tokens])):
        if min(values) < 1:
            raise ConfigError(f"{name}={min(values)}: must be an integer >= 1")
    titan_layers = [int(x) for x in _pop(argv, "titan_layers", "").split(",") if x]
    sw_window_text = _pop(argv, "sw_window", "4096")
    if not sw_window_text.isdigit() or int(sw_window_text) < 1:
        raise ConfigError(f"sw_window={sw_window_text!r}: must be an integer >= 1")
    source = _pop(argv, "inputs", "ruler")
    if source not in ("ruler", "synthetic"):
        raise ConfigError(f"inputs={source!r}: allowed values are ruler, synthetic")
    reject_flags(argv, "latency", "--json")
    tasks_given = any(a.startswith("bench.tasks=") for a in argv)
    cfg = load_config(argv)
    check_model_config(cfg)  # a Triton kernel on a CPU machine, an unbuildable random-init model
    set_kernels(cfg.kernels)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    def make_inputs(tokenizer, n: int) -> list[LatencyInput]:
        if source == "synthetic":
            return synthetic_inputs(tokenizer, n)
        return ruler_inputs(tokenizer, n, tuple(cfg.bench.tasks) if tasks_given else PAPER_TASKS, cfg.bench)

    if titan_layers:
        rows = titan_layer_rows(cfg, titan_layers, lengths, make_inputs, new_tokens, repeats)
        print(json.dumps({"rows": rows}, indent=2) if as_json else "\n".join(
            f"{r['length']:>8,}  k={r['layers']:<3} Plain {r['plain_seconds']:.3f} s  Titan {r['titan_seconds']:.3f} s  "
            f"ratio {r['latency_ratio']:.3f}  peak ratio {r['peak_ratio']:.3f}" for r in rows))
        return 0
    if cfg.method.name == "infllm":
        rows = transformer_rows(cfg, int(sw_window_text), lengths, make_inputs, new_tokens, repeats)
        print(json.dumps({"rows": rows}, indent=2) if as_json else "\n".join(
            f"{r['length']:>8,}  Full {r['full_seconds']:.3f} s {r['full_peak_bytes'] / 2**30:.2f} GiB  "
            f"SW{r['window']} {r['sw_seconds']:.3f} s {r['sw_peak_bytes'] / 2**30:.2f} GiB  "
            f"InfLLM {r['infllm_seconds']:.3f} s {r['infllm_peak_bytes'] / 2**30:.2f} GiB, "
            f"host KV {r['infllm_host_kv_bytes'] / 2**20:.2f} MiB" for r in rows))
        return 0
    nb_cfg = cfg.method if cfg.method.name == NoteBankConfig.name else NoteBankConfig()
    backbone = load_backbone(cfg.backbone)
    methods = {"plain": build_method(PlainConfig()), "notebank": build_method(nb_cfg)}
    for method in methods.values():
        method.prepare(backbone)
    results = {}
    for length in lengths:
        if source == "synthetic":
            inputs = synthetic_inputs(backbone.tokenizer, length)
        else:
            from memexp.benchmarks.ruler.sources import MissingData

            tasks = tuple(cfg.bench.tasks) if tasks_given else PAPER_TASKS
            try:
                inputs = ruler_inputs(backbone.tokenizer, length, tasks, cfg.bench)
            except MissingData as e:
                raise ConfigError(f"{e}; or time random sentences with inputs=synthetic") from None
        results[length] = measure_latency(backbone, methods, inputs, new_tokens, repeats)
        print(f"[memexp] latency at {length:,} tokens done", file=sys.stderr)
    rows = ratio_rows(results)
    if as_json:
        print(json.dumps({"rows": rows, "results": {str(k): v for k, v in results.items()}}, indent=2))
    else:
        print(format_ratio_table(rows, next(iter(results.values()))["memory"] if results else ""))
    return 0
