"""Routing time, PyTorch reference vs memexp's Triton kernel (the Table 8 setting: a 4,096-note
bank at 1M tokens, 192 GDN channels, d_rho = 16, a 64-token question).

    python scripts/bench_routing.py [--notes 4096 --channels 192 --dim 16 --question 64]

Times the CPU reference always, and on CUDA the reference and the kernel. Under
TRITON_INTERPRET=1 the kernel runs in Triton's interpreter: its time is not performance and is
not reported. Addresses are bf16 as in the archive, questions fp32 as the probe returns them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

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


def inputs(args, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    addresses = torch.randn(args.notes, args.channels, args.dim, generator=g).to(device=device, dtype=torch.bfloat16)
    queries = torch.randn(args.question, args.channels, args.dim, generator=g).to(device)
    return addresses, queries


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--notes", type=int, default=4096)
    p.add_argument("--channels", type=int, default=192)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--question", type=int, default=64)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    print(f"routing {args.notes:,} notes x {args.channels} channels x d_rho {args.dim}, "
          f"{args.question}-token question; median of {args.repeats}")
    cpu = torch.device("cpu")
    a, q = inputs(args, cpu)
    t = median_seconds(lambda: route_votes_reference(a, q), args.repeats, cpu)
    print(f"  reference, CPU ({torch.get_num_threads()} threads): {t * 1e3:9.3f} ms")

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
    print(f"  reference, {torch.cuda.get_device_name(cuda)}: {t_ref * 1e3:9.3f} ms")
    print(f"  kernel,    {torch.cuda.get_device_name(cuda)}: {t_ker * 1e3:9.3f} ms  "
          f"({t_ref / t_ker:.1f}x; channels choosing the reference's note: {agree:.1%})")


if __name__ == "__main__":
    main()
