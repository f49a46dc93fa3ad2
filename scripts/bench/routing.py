"""Routing time, PyTorch reference vs memexp's tiled CPU path and Triton kernel (the Table 8
setting: a 4,096-note bank at 1M tokens, 192 GDN channels, d_rho = 16, a 64-token question).

    python scripts/bench/routing.py [--notes 4096 --channels 192 --dim 16 --question 64 --threads 1,2]

On CPU, the reference and the tiled path run interleaved at each thread count, so a ratio
compares calls that saw the same machine load; the best of the repeats is the time (the median
follows in brackets) and the load average is printed before and after. On CUDA, the reference
and the kernel. Under TRITON_INTERPRET=1 the kernel runs in Triton's interpreter: its time is
not performance and is not reported. Addresses are bf16 as in the archive, questions fp32 as
the probe returns them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from memexp.kernels.routing.cpu import route_votes_cpu
from memexp.kernels.routing.reference import route_votes_reference


def median_seconds(fn, repeats: int, device: torch.device) -> float:
    fn()  # warm-up: allocations, kernel compilation
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved_cpu_seconds(runs: dict[str, tuple[int, object]], repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each (threads, fn), taking turns within every repeat."""
    for threads, fn in runs.values():  # warm-up: allocator, MKL/oneDNN dispatch
        torch.set_num_threads(threads)
        fn()
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (threads, fn) in runs.items():
            torch.set_num_threads(threads)
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def inputs(args, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    addresses = torch.randn(args.notes, args.channels, args.dim, generator=g).to(device=device, dtype=torch.bfloat16)
    queries = torch.randn(args.question, args.channels, args.dim, generator=g).to(device)
    return addresses, queries


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_cpu(args) -> None:
    a, q = inputs(args, torch.device("cpu"))
    ref = route_votes_reference(a, q)
    out = route_votes_cpu(a, q)
    rel = ((out[2] - ref[2]).pow(2).mean().sqrt() / ref[2].pow(2).mean().sqrt()).item()
    agree = (out[1] == ref[1]).float().mean().item()
    print(f"  tiled vs reference: scores rel. RMS {rel:.1e}, max abs {(out[2] - ref[2]).abs().max().item():.1e}; "
          f"channels choosing the reference's note: {agree:.1%}")

    threads = [int(x) for x in args.threads.split(",")]
    own = torch.get_num_threads()
    runs = {}
    for n in threads:
        runs[f"reference@{n}"] = (n, lambda: route_votes_reference(a, q))
        runs[f"tiled@{n}"] = (n, lambda: route_votes_cpu(a, q))
    print(f"  CPU, interleaved, best of {args.repeats} (median); load average before: {load()}")
    times = interleaved_cpu_seconds(runs, args.repeats)
    torch.set_num_threads(own)
    for n in threads:
        ref_t, fast_t = times[f"reference@{n}"], times[f"tiled@{n}"]
        label = f"{n} thread" + ("s" if n > 1 else "")
        print(f"  reference, CPU ({label}): {min(ref_t) * 1e3:9.3f} ms ({statistics.median(ref_t) * 1e3:.3f})")
        print(f"  tiled,     CPU ({label}): {min(fast_t) * 1e3:9.3f} ms ({statistics.median(fast_t) * 1e3:.3f})  "
              f"{min(ref_t) / min(fast_t):.1f}x")
    print(f"  load average after: {load()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--notes", type=int, default=4096)
    p.add_argument("--channels", type=int, default=192)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--question", type=int, default=64)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--threads", default="1,2", help="comma-separated torch CPU thread counts for the CPU runs")
    args = p.parse_args()

    print(f"routing {args.notes:,} notes x {args.channels} channels x d_rho {args.dim}, "
          f"{args.question}-token question")
    bench_cpu(args)

    if not torch.cuda.is_available():
        print("  kernel: no CUDA device (interpreter timings are not performance)")
        return
    from memexp.kernels.routing.triton import route_votes_triton

    cuda = torch.device("cuda")
    a, q = inputs(args, cuda)
    ref = route_votes_reference(a, q)
    out = route_votes_triton(a, q)
    agree = (out[1] == ref[1]).float().mean().item()
    t_ref = median_seconds(lambda: route_votes_reference(a, q), args.repeats, cuda)
    t_ker = median_seconds(lambda: route_votes_triton(a, q), args.repeats, cuda)
    print(f"  reference, {torch.cuda.get_device_name(cuda)}: {t_ref * 1e3:9.3f} ms (median of {args.repeats})")
    print(f"  kernel,    {torch.cuda.get_device_name(cuda)}: {t_ker * 1e3:9.3f} ms  "
          f"({t_ref / t_ker:.1f}x; channels choosing the reference's note: {agree:.1%})")


if __name__ == "__main__":
    main()
