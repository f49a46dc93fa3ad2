"""Prefill throughput and memory of the CPU reference Gated DeltaNet.

    python scripts/bench/prefill.py                          # defaults below, ~ minutes on 2 idle cores
    python scripts/bench/prefill.py --tokens 512 --big-layers 2 --rss-lengths 2048 8192   # quick check

Measures, in one process and with random weights:
  1. model prefill tokens/s of the tiny config and a 1.3B-shaped GDN (hidden 2048, 8 heads x 256,
     expand_v 1, MLP 5632, vocab 32000; --big-layers of its 24 layers, so the per-layer cost is
     the real one and the total is scaled down), chunked vs recurrent form of the recurrence;
  2. the chunked reference op vs transformers' torch fallback (torch_chunk_gated_delta_rule)
     on the same shapes;
  3. peak RSS of a tiny-config prefill at two lengths (default 8K and 64K), each in a fresh
     subprocess: the state is fixed-size and forward works in bounded chunks, so the peak
     must not grow with length.
Prints a table; ratios > 1 mean the first-named variant is faster (or, for RSS, larger).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import time

import torch

TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 32, "vocab_size": 258}
GDN_1B3 = {"hidden_size": 2048, "num_heads": 8, "head_dim": 256, "expand_v": 1, "intermediate_size": 5632,
           "vocab_size": 32000}


def best_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: allocator, lazy imports
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def backbone(model: dict, prefill_chunk: int = 2048):
    from memexp.backbones import load_backbone

    return load_backbone({"name": "bench", "arch": "gdn", "tokenizer": "byte",
                          "device": "cpu", "dtype": "float32", "prefill_chunk": prefill_chunk, "model": model})


def model_throughput(model: dict, tokens: int, repeats: int) -> dict[str, float]:
    bb = backbone(model)
    ids = torch.randint(0, 256, (tokens,), generator=torch.Generator().manual_seed(0))
    out = {}
    for form in ("chunk", "recurrent"):
        for block in bb.model.model.layers:
            block.attn.form = form
        out[form] = tokens / best_seconds(lambda: bb.forward(bb.init_state(), ids), repeats)
    return out


def op_throughput(heads: int, d: int, tokens: int, repeats: int) -> dict[str, float]:
    from transformers.models.qwen3_next import modeling_qwen3_next

    from memexp.kernels.gated_delta_rule import chunk_gated_delta_rule_ref

    # transformers swaps FLA's Triton kernel in when fla is installed; unwrap to its torch code
    from memexp.kernels.l2norm import l2_norm
    torch_chunk_gated_delta_rule = inspect.unwrap(modeling_qwen3_next.torch_chunk_gated_delta_rule)
    gen = torch.Generator().manual_seed(0)
    q = l2_norm(torch.randn(1, tokens, heads, d, generator=gen))
    k = l2_norm(torch.randn(1, tokens, heads, d, generator=gen))
    v = torch.randn(1, tokens, heads, d, generator=gen)
    g = -torch.rand(1, tokens, heads, generator=gen) * 0.1
    beta = torch.rand(1, tokens, heads, generator=gen)
    h0 = torch.zeros(1, heads, d, d)
    ours = chunk_gated_delta_rule_ref(q, k, v, g, beta, initial_state=h0)
    theirs = torch_chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    diff = max((ours[0] - theirs[0]).abs().max().item(), (ours[1] - theirs[1]).abs().max().item())
    t_ours = best_seconds(lambda: chunk_gated_delta_rule_ref(q, k, v, g, beta, initial_state=h0), repeats)
    t_hf = best_seconds(lambda: torch_chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                                              output_final_state=True), repeats)
    return {"memexp": tokens / t_ours, "transformers": tokens / t_hf, "max_abs_diff": diff}


def rss_child(tokens: int) -> None:
    """Prefill `tokens` random bytes through the tiny config; print peak RSS in MiB."""
    bb = backbone(TINY)
    state = bb.init_state()
    gen = torch.Generator().manual_seed(0)
    step = 8192  # the caller's ids arrive in pieces too, so the input itself stays small
    for start in range(0, tokens, step):
        bb.forward(state, torch.randint(0, 256, (min(step, tokens - start),), generator=gen))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"tokens": tokens, "peak_rss_mib": peak_kib / 1024, "position": state.position}))


def peak_rss(tokens: int, threads: int | None) -> float:
    cmd = [sys.executable, __file__, "--rss-child", str(tokens)]
    if threads:
        cmd += ["--threads", str(threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return json.loads(out)["peak_rss_mib"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=1024, help="prefill length for the throughput rows")
    ap.add_argument("--big-layers", type=int, default=4, help="layers of the 1.3B-shaped model (24 in the real one)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rss-lengths", type=int, nargs=2, default=[8192, 65536])
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--rss-child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.rss_child is not None:
        rss_child(args.rss_child)
        return
    big = {**GDN_1B3, "num_hidden_layers": args.big_layers}
    rows = []
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, prefill {args.tokens} tokens, fp32 CPU reference")
    for label, model in (("tiny", TINY), (f"1.3B-shaped ({args.big_layers}/24 layers)", big)):
        r = model_throughput(model, args.tokens, args.repeats)
        rows.append((f"model {label}: chunk / recurrent", r["chunk"], r["recurrent"]))
    for label, (heads, d) in (("tiny", (2, 32)), ("1.3B-shaped", (8, 256))):
        r = op_throughput(heads, d, args.tokens, args.repeats)
        rows.append((f"op {label}: memexp chunk / transformers chunk (max|diff| {r['max_abs_diff']:.1e})",
                     r["memexp"], r["transformers"]))
    short, long = args.rss_lengths
    rss_short, rss_long = peak_rss(short, args.threads), peak_rss(long, args.threads)

    width = max(len(r[0]) for r in rows) + 2
    print(f"\n{'throughput (tokens/s)':<{width}}{'first':>12}{'second':>12}{'ratio':>8}")
    for name, a, b in rows:
        print(f"{name:<{width}}{a:>12.1f}{b:>12.1f}{a / b:>8.2f}")
    print(f"\n{'peak RSS, tiny prefill (MiB)':<{width}}{short:>12}{long:>12}{'ratio':>8}")
    print(f"{'':<{width}}{rss_short:>12.1f}{rss_long:>12.1f}{rss_long / rss_short:>8.2f}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
