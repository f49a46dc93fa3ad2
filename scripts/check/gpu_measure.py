"""The GPU check's measurements, one subcommand per report section (run by scripts/check/gpu_check.py).

    python scripts/check/gpu_measure.py env        # versions, and which kernel library serves each op
    python scripts/check/gpu_measure.py kernels    # every dispatched kernel against memexp's reference op
    python scripts/check/gpu_measure.py models     # real-size configs, random weights: CUDA bf16 vs CPU fp32
    python scripts/check/gpu_measure.py routing    # NoteBank routing at 4,096 notes, Triton kernel vs reference
    python scripts/check/gpu_measure.py notebank --lengths 65536,262144,1048576 --budget 200
    python scripts/check/gpu_measure.py titan      # Titan-Llama Fig. 4 / Table 1 efficiency, Llama-3.2-1B shapes

Each prints a markdown table with the paper's figure beside memexp's (where the paper has one).
`--smoke` runs the same code on this machine's CPU at tiny shapes (the suite does, so that no
section first fails on the GPU); its numbers mean nothing. No checkpoint is needed: the real-size
models are the exact configurations of the paper checkpoints with seeded random weights, which
time and compare like the trained ones (the kernels and the methods do the same work whatever the
weights). Errors are ||out - ref|| / ||ref|| over the whole tensor, with ref in fp32.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from memexp.backbones import load_backbone
from memexp.backbones.shapes import KNOWN_CONFIGS
from memexp.core.schema import BackboneConfig
from memexp.kernels.dispatch import kernel_calls, library_status, reset_kernel_calls

GDN = "m-a-p/1.3B-100B-GatedDeltaNet-pure"
MAMBA2 = "state-spaces/mamba2-1.3b"
# meta-llama/Llama-3.2-1B(-Instruct)'s config.json (the architecture fields memexp reads)
LLAMA32_1B = {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
              "head_dim": 64, "intermediate_size": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
              "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
              "max_position_embeddings": 131072, "vocab_size": 128256, "tie_word_embeddings": True}
SMOKE = {
    "gdn": {"hidden_size": 64, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 32, "vocab_size": 258},
    "mamba2": {"d_model": 64, "n_layer": 2, "vocab_size": 258, "ssm_cfg": {"layer": "Mamba2", "headdim": 16,
                                                                          "d_state": 16}},
    "llama": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "vocab_size": 258},
}
# Tolerances on ||out - ref|| / ||ref||, derived from the unit roundoff u of the inputs' format, not
# tuned: bf16 inputs carry u = 2^-8 ~ 3.9e-3 each, and a chunked scan or a product sums many such
# terms whose errors add like a random walk, so a few u (here 8u ~ 3.1e-2) bounds a correct kernel;
# fp32 inputs go through tf32 tensor-core products in the Triton kernels (10-bit mantissa, u = 2^-11
# ~ 4.9e-4), and 8u ~ 3.9e-3 bounds those. A wrong index or a missing chunk is off by O(1).
TOLERANCE = {torch.bfloat16: 8 * 2.0**-8, torch.float32: 8 * 2.0**-11}


@dataclass
class Setup:
    device: torch.device
    smoke: bool

    def pick(self, full, small):
        return small if self.smoke else full


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    if not torch.isfinite(out).all():
        return float("nan")
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def table(head: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def paths_used() -> str:
    calls = kernel_calls()
    return ", ".join(f"{lib}: {way} x{n}" for (lib, way), n in sorted(calls.items())) or "no CUDA op calls"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int = 2) -> float:
    """Median seconds of one call of `fn` over `repeats` calls after `warmup` untimed ones (the
    device synchronised around each)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---- env ------------------------------------------------------------------------------------------

def cmd_env(s: Setup, args) -> int:
    import transformers
    import triton

    rows = [["python", sys.version.split()[0]], ["torch", f"{torch.__version__} (CUDA {torch.version.cuda})"],
            ["transformers", transformers.__version__], ["triton", triton.__version__],
            ["device", torch.cuda.get_device_name(0) if s.device.type == "cuda" else "cpu"]]
    for lib in ("fla", "mamba_ssm", "causal_conv1d", "flash_attn"):
        rows.append([lib, library_status(lib)])
    import memexp

    rows.append(["memexp imported from", memexp.__file__])
    print(table(["what", "value"], rows))
    return 0


# ---- kernels --------------------------------------------------------------------------------------

def _gdn_inputs(T, H, K, V, dtype, device, g_scale=0.05):
    q = F.normalize(torch.randn(1, T, H, K, device=device), dim=-1).to(dtype)
    k = F.normalize(torch.randn(1, T, H, K, device=device), dim=-1).to(dtype)
    v = torch.randn(1, T, H, V, device=device).to(dtype)
    g = -F.softplus(torch.randn(1, T, H, device=device)) * g_scale * 10
    beta = torch.rand(1, T, H, device=device).to(dtype)
    h0 = torch.randn(1, H, K, V, device=device) * 0.1
    return q, k, v, g, beta, h0


def _split_run(op, seq: dict[str, torch.Tensor], fixed: dict, T: int, cut: int, h0):
    """op over tokens [0, cut) then [cut, T) carrying the state (continuation across an awkward
    split): `seq` are the per-token arguments [B, T, ...], `fixed` the others."""
    o1, s1 = op(**{k: t[:, :cut] for k, t in seq.items()}, **fixed, initial_state=h0)
    o2, s2 = op(**{k: t[:, cut:T] for k, t in seq.items()}, **fixed, initial_state=s1)
    return torch.cat([o1, o2], dim=1), s2


def _backward_error(op, ref, inputs: dict[str, torch.Tensor], h0: torch.Tensor) -> tuple[float, str]:
    """The gradients of a short chunk (what a LoRA step on a recurrent layer backpropagates
    through) against the fp32 reference's: ||d - d_ref|| / ||d_ref|| over every input's gradient.
    FLA's fused-recurrent kernel has no backward, so a call that reached it fails here."""
    leaves = {k: t.detach().clone().requires_grad_(True) for k, t in inputs.items()}
    ref_leaves = {k: t.detach().float().clone().requires_grad_(True) for k, t in inputs.items()}
    with torch.enable_grad():  # main() measures under no_grad
        o, st = op(**leaves, initial_state=h0)
        weight = torch.randn(o.shape, generator=torch.Generator().manual_seed(1)).to(o.device)
        try:
            ((o.float() * weight).sum() + st.float().sum()).backward()
        except NotImplementedError as e:
            return float("nan"), f"; no backward: {str(e)[:60]}"
        ro, rs = ref(**ref_leaves, initial_state=h0)
        ((ro * weight).sum() + rs.sum()).backward()
    got = torch.cat([leaves[k].grad.float().flatten() for k in inputs])
    want = torch.cat([ref_leaves[k].grad.flatten() for k in inputs])
    return rel(got, want), ""


def kernel_rows(s: Setup) -> list[list]:
    from memexp.kernels.distinctiveness import chunk_distinctiveness, chunk_distinctiveness_reference
    from memexp.kernels.gated_delta_rule import chunk_gated_delta_rule_ref, gated_delta_rule
    from memexp.kernels.gdn2_rule import chunk_gdn2_ref, gdn2_rule
    from memexp.kernels.routing import route_votes, route_votes_reference
    from memexp.kernels.short_conv import short_conv
    from memexp.kernels.ssd import chunk_ssd_ref, recurrent_ssd_ref, ssd, step_sizes

    dev = s.device
    rows = []
    T, cut = s.pick((1000, 333), (100, 37))  # crosses 64-, 32- and 256-token chunks at awkward offsets

    def add(op, shape, dtype, err, extra=""):
        tol = TOLERANCE[dtype]
        ok = "ok" if err == err and err <= tol else "FAIL"
        rows.append([op, shape, str(dtype).replace("torch.", ""), f"{err:.2e}", f"{tol:.1e}", ok,
                     paths_used() + extra])
        reset_kernel_calls()

    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    H, K = s.pick((8, 256), (2, 32))
    for dtype in (torch.bfloat16, torch.float32):
        q, k, v, g, beta, h0 = _gdn_inputs(T, H, K, K, dtype, dev)
        ref_o, ref_s = chunk_gated_delta_rule_ref(q.float(), k.float(), v.float(), g, beta.float(), initial_state=h0)
        reset_kernel_calls()
        o, st = _split_run(gated_delta_rule, dict(q=q, k=k, v=v, g=g, beta=beta), {}, T, cut, h0)
        add("GDN chunk (1.3B: 8 heads x 256)", f"T={cut}+{T - cut}", dtype, max(rel(o, ref_o), rel(st, ref_s)))
        n = s.pick(37, 5)  # <= 64 tokens: FLA's fused recurrent kernel
        r_o, r_s = chunk_gated_delta_rule_ref(q[:, :n].float(), k[:, :n].float(), v[:, :n].float(), g[:, :n],
                                              beta[:, :n].float(), initial_state=h0)
        o, st = gated_delta_rule(q[:, :n], k[:, :n], v[:, :n], g[:, :n], beta[:, :n], initial_state=h0)
        add("GDN fused recurrent", f"T={n}", dtype, max(rel(o, r_o), rel(st, r_s)))
        if dtype == torch.bfloat16:
            err, note = _backward_error(gated_delta_rule, chunk_gated_delta_rule_ref,
                                        dict(q=q[:, :n], k=k[:, :n], v=v[:, :n], g=g[:, :n], beta=beta[:, :n]), h0)
            add("GDN backward, short chunk (training: chunk kernel)", f"T={n}", dtype, err, note)

    H2, K2 = s.pick((16, 128), (2, 16))  # GDN-2 1.3B: 16 heads x 128
    for dtype in (torch.bfloat16, torch.float32):
        q, k, v, _, _, h0 = _gdn_inputs(T, H2, K2, K2, dtype, dev)
        g = -F.softplus(torch.randn(1, T, H2, K2, device=dev)) * 0.5
        b = torch.rand(1, T, H2, K2, device=dev).to(dtype)
        w = torch.rand(1, T, H2, K2, device=dev).to(dtype)
        ref_o, ref_s = chunk_gdn2_ref(q.float(), k.float(), v.float(), g, b.float(), w.float(), initial_state=h0)
        reset_kernel_calls()
        o, st = _split_run(gdn2_rule, dict(q=q, k=k, v=v, g=g, b=b, w=w), {}, T, cut, h0)
        add("GDN-2 chunk (1.3B: 16 heads x 128)", f"T={cut}+{T - cut}", dtype, max(rel(o, ref_o), rel(st, ref_s)))
        if dtype == torch.bfloat16:
            n = s.pick(37, 5)
            err, note = _backward_error(gdn2_rule, chunk_gdn2_ref,
                                        dict(q=q[:, :n], k=k[:, :n], v=v[:, :n], g=g[:, :n], b=b[:, :n], w=w[:, :n]), h0)
            add("GDN-2 backward, short chunk (training: chunk kernel)", f"T={n}", dtype, err, note)

    Hm, P, N = s.pick((64, 64, 128), (4, 16, 16))  # mamba2-1.3b: d_inner 4096 = 64 heads x 64, d_state 128, 1 group
    A = -torch.rand(Hm, device=dev) * 4 - 0.5
    D = torch.randn(Hm, device=dev)
    dt_bias = torch.randn(Hm, device=dev) * 0.5
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(1, T, Hm, P, device=dev).to(dtype)
        dt = torch.randn(1, T, Hm, device=dev).to(dtype)
        B = torch.randn(1, T, 1, N, device=dev).to(dtype)
        C = torch.randn(1, T, 1, N, device=dev).to(dtype)
        h0 = torch.randn(1, Hm, P, N, device=dev) * 0.1
        sdt = step_sizes(dt, dt_bias)
        ref_y, ref_s = chunk_ssd_ref(x.float(), sdt, A, B.float(), C.float(), D, h0)
        reset_kernel_calls()
        y, st = _split_run(ssd, dict(x=x, dt=dt, B=B, C=C), dict(A=A, D=D, dt_bias=dt_bias), T, cut, h0)
        add("Mamba-2 SSD chunk scan (1.3B: 64 heads x 64, N 128)", f"T={cut}+{T - cut}", dtype,
            max(rel(y, ref_y), rel(st, ref_s)))
        r_y, r_s = recurrent_ssd_ref(x[:, :1].float(), sdt[:, :1], A, B[:, :1].float(), C[:, :1].float(), D, h0)
        y, st = ssd(x[:, :1], dt[:, :1], A, B[:, :1], C[:, :1], D, dt_bias, initial_state=h0)
        add("Mamba-2 SSD decode step", "T=1", dtype, max(rel(y, r_y), rel(st, r_s)))

    for name, channels in (("GDN q/k/v", s.pick(2048, 64)), ("Mamba-2 xBC", s.pick(4352, 48))):
        for dtype in (torch.bfloat16, torch.float32):
            x = torch.randn(1, T, channels, device=dev).to(dtype)
            w = torch.randn(channels, 4, device=dev) * 0.5
            bias = torch.randn(channels, device=dev) * 0.1
            ref_y, ref_w = short_conv(x.float().cpu(), w.cpu(), bias.cpu())  # the CPU torch path is the reference
            reset_kernel_calls()
            pieces = [short_conv(x[:, :cut], w, bias)]
            pieces.append(short_conv(x[:, cut:], w, bias, pieces[0][1]))
            y = torch.cat([pieces[0][0], pieces[1][0]], dim=1)
            add(f"short conv, {name} ({channels} ch, width 4)", f"T={cut}+{T - cut}", dtype,
                max(rel(y, ref_y), rel(pieces[1][1], ref_w)))

    notes, ch, dk, tq = s.pick((4096, 192, 256, 24), (64, 8, 32, 6))  # GDN-1.3B: 24 layers x 8 heads
    addr = torch.randn(notes, ch, dk, generator=gen).to(dev, torch.bfloat16)
    qs = torch.randn(tq, ch, dk, generator=gen).to(dev, torch.bfloat16)
    rv, rb, rs = route_votes_reference(addr, qs)
    reset_kernel_calls()
    votes, best, scores = route_votes(addr, qs)
    same = "same votes" if torch.equal(votes.cpu(), rv.cpu()) and torch.equal(best.cpu(), rb.cpu()) else "VOTES DIFFER"
    add(f"routing max-sim + vote ({notes} notes x {ch} ch x {dk})", f"Tq={tq}", torch.bfloat16, rel(scores, rs),
        f"; {same}")
    if same != "same votes":
        rows[-1][5] = "FAIL"
    keys = torch.randn(s.pick(512, 64), ch, dk, generator=gen).to(dev, torch.bfloat16)
    reset_kernel_calls()
    add(f"distinctiveness (chunk 512 x {ch} ch)", "C=512", torch.bfloat16,
        rel(chunk_distinctiveness(keys), chunk_distinctiveness_reference(keys)))
    return rows


def cmd_kernels(s: Setup, args) -> int:
    rows = kernel_rows(s)
    print(table(["op", "shape", "dtype", "rel. error", "tolerance", "", "path that ran"], rows))
    return 1 if any(r[5] != "ok" for r in rows) else 0


# ---- models ---------------------------------------------------------------------------------------

def model_configs(s: Setup) -> list[tuple[str, str, dict]]:
    if s.smoke:
        return [("GDN (tiny)", "gdn", SMOKE["gdn"]), ("Mamba-2 (tiny)", "mamba2", SMOKE["mamba2"]),
                ("Llama (tiny)", "llama", SMOKE["llama"])]
    return [("GatedDeltaNet-1.3B", "gdn", KNOWN_CONFIGS[GDN].fields), ("mamba2-1.3b", "mamba2",
             KNOWN_CONFIGS[MAMBA2].fields), ("Llama-3.2-1B", "llama", LLAMA32_1B)]


def backbone(arch: str, model: dict, device: str, dtype: str, **kw):
    cfg = BackboneConfig(name=f"{arch}_real_shapes", arch=arch, model=dict(model), tokenizer="byte", seed=0,
                         device=device, dtype=dtype, **kw)
    return load_backbone(cfg)


def cmd_models(s: Setup, args) -> int:
    """Same seeded weights twice: fp32 on the CPU (memexp's reference ops) and bf16 on the device
    (its kernels); the logits of a short input and of a continuation token after it."""
    gen = torch.Generator().manual_seed(1)
    n = s.pick(256, 40)
    ids = torch.randint(1, 258, (n + 1,), generator=gen).tolist()
    rows, failed = [], False
    # bf16 weights and activations through L layers: each layer's output carries rounding of order
    # u = 2^-8 relative to the residual stream, and the errors of L layers add like a random walk:
    # sqrt(L) * u * (a few) ~ 0.1 at L = 48 bounds a correct bf16 model against fp32 on random weights.
    tol = 0.1
    for label, arch, model in model_configs(s):
        t0 = time.perf_counter()
        ref = backbone(arch, model, "cpu", "float32")
        st = ref.init_state()
        ref_a = ref.forward(st, ids[:-1])
        ref_b = ref.forward(st, ids[-1:])
        params = sum(p.numel() for p in ref.model.parameters())
        del ref, st
        gc.collect()
        dev = backbone(arch, model, s.device.type, "bfloat16")
        reset_kernel_calls()
        st = dev.init_state()
        a = dev.forward(st, ids[:-1])
        b = dev.forward(st, ids[-1:])
        err = max(rel(a, ref_a), rel(b, ref_b))
        top = int(a.argmax()) == int(ref_a.argmax()) and int(b.argmax()) == int(ref_b.argmax())
        ok = err == err and err <= tol
        failed |= not ok
        rows.append([label, f"{params / 1e9:.3f} B", f"{n} + 1", f"{err:.2e}", f"{tol:g}", "same" if top else "differs",
                     "ok" if ok else "FAIL", paths_used(), f"{time.perf_counter() - t0:.0f} s"])
        del dev, st
        gc.collect()
        if s.device.type == "cuda":
            torch.cuda.empty_cache()
    print(table(["config (random weights)", "params", "tokens", "logits rel. error", "tolerance", "top-1", "",
                 "path that ran", "time"], rows))
    return 1 if failed else 0


# ---- routing --------------------------------------------------------------------------------------

def cmd_routing(s: Setup, args) -> int:
    from memexp.kernels.routing import route_votes, route_votes_reference

    notes, ch, dk, tq = s.pick((4096, 192, 256, 24), (64, 8, 32, 6))
    gen = torch.Generator().manual_seed(2)
    addr = torch.randn(notes, ch, dk, generator=gen).to(s.device, torch.bfloat16)
    qs = torch.randn(tq, ch, dk, generator=gen).to(s.device, torch.bfloat16)
    reps = s.pick(50, 3)
    t_kernel = median_seconds(lambda: route_votes(addr, qs), s.device, reps)
    path = paths_used()
    reset_kernel_calls()
    t_ref = median_seconds(lambda: route_votes_reference(addr, qs), s.device, reps)
    print(table(["routing at", "memexp kernel (median)", "PyTorch reference (median)", "paper (H100)", "path"],
                [[f"{notes:,} notes x {ch} channels x {dk}, {tq} question positions", f"{t_kernel * 1e3:.3f} ms",
                  f"{t_ref * 1e3:.3f} ms", "26 ms, question probe included (memexp's figure excludes the probe: "
                  "its forward over the question is in the NoteBank rows' `probe` stage)", path]]))
    return 0


# ---- NoteBank Table 7 / App. C.5 -----------------------------------------------------------------

PAPER_TABLE7 = {1048576: ("125.11 s", "140.64 s", "2.93 GiB", "3.27 GiB")}


def cmd_notebank(s: Setup, args) -> int:
    """Plain against NB-TF (native router, R = 2, the paper's C, W, B) on GDN-1.3B shapes, batch 1,
    32 generated tokens with stopping off: per length one warm-up and `--repeats` timed runs of each
    (order alternated), wall time and torch.cuda.max_memory_allocated (weights included). A length
    whose predicted cost (from the previous length's time per token) exceeds what is left of
    `--budget` is skipped and says so."""
    from memexp.methods import build_method
    from memexp.methods.notebank.config import NoteBankConfig
    from memexp.methods.plain.config import PlainConfig
    from memexp.run.latency import PeakMemory, run_once, synthetic_inputs

    model = s.pick(KNOWN_CONFIGS[GDN].fields, SMOKE["gdn"])
    bb = backbone("gdn", model, s.device.type, "bfloat16", prefill_chunk=args.prefill_chunk)
    methods = {"plain": build_method(PlainConfig()), "notebank": build_method(NoteBankConfig(replay_budget=2))}
    for m in methods.values():
        m.prepare(bb)
    memory = PeakMemory(bb.device)
    lengths = [int(x) for x in args.lengths.split(",")] if args.lengths else s.pick([65536, 262144, 1048576],
                                                                                  [512, 2048])
    deadline = time.monotonic() + args.budget
    rows, per_token = [], None
    runs = 1 + args.repeats
    flops_token = 2 * sum(p.numel() for p in bb.model.parameters())  # ~2 N per token (weights' matmuls)
    peak_flops = 989e12  # dense bf16, H100/H200 datasheet: the paper's "2.5 % of peak" uses this figure
    for n in lengths:
        left = deadline - time.monotonic()
        if per_token is not None and per_token * n * runs * 2 * 1.2 > left:
            rows.append([f"{n:,}", "skipped", f"predicted {per_token * n * runs * 2:.0f} s > {left:.0f} s left"]
                        + [""] * 7)
            continue
        inp = synthetic_inputs(bb.tokenizer, n)[0]
        secs = {m: [] for m in methods}
        peaks = {m: [] for m in methods}
        stages = {}
        for r in range(runs):
            for name in (list(methods) if r % 2 == 0 else list(methods)[::-1]):
                memory.reset()
                sync(bb.device)
                t0 = time.perf_counter()
                seconds = run_once(bb, methods[name], inp, 32).seconds
                sync(bb.device)
                if r > 0:  # run 0 is the warm-up
                    secs[name].append(time.perf_counter() - t0)
                    peaks[name].append(memory.peak())
                    stages[name] = seconds
        p, nb = statistics.median(secs["plain"]), statistics.median(secs["notebank"])
        per_token = max(p, nb) / n
        frac = flops_token * n / p / peak_flops
        paper = PAPER_TABLE7.get(n, ("", "", "", ""))
        rows.append([f"{n:,}", f"{p:.2f} s", f"{nb:.2f} s", f"{nb / p - 1:+.1%}", f"{p / n * 1e6:.2f} us",
                     f"{max(peaks['plain']) / 2**30:.2f} GiB", f"{max(peaks['notebank']) / 2**30:.2f} GiB",
                     f"{frac:.1%}", " / ".join(x for x in paper if x) or "",
                     ", ".join(f"{k} {v:.2f} s" for k, v in stages.get("notebank", {}).items())])
        print(f"notebank: {n:,} tokens done", file=sys.stderr, flush=True)
    print(table(["length", "Plain", "NB-TF", "NB-TF / Plain", "Plain per token", "Plain peak", "NB-TF peak",
                 "Plain prefill % of bf16 peak", "paper (H100): Plain / NB-TF / peaks", "NB-TF stages (last run)"],
                rows))
    print(f"\nruns per length and method: 1 warm-up + {args.repeats} timed; memory: {memory.kind}; "
          f"prefill_chunk {args.prefill_chunk}; params {flops_token / 2 / 1e9:.3f} B; paths: {paths_used()}")
    print("goals (issue 39): NB-TF / Plain <= +5 % at 64K and above (paper: +10.6-13.2 %); Plain at 1M <= 30 s.")
    return 0


# ---- Titan-Llama Fig. 4 / Table 1 -----------------------------------------------------------------

def _decode(bb, state, steps: int) -> dict[str, str]:
    """Decode as the paper times it, from a state that read the context: the median per-token latency
    over `steps` greedy steps, eagerly (`Backbone.forward`, one token), in static shapes
    (memexp.backbones.static_decode), and as CUDA graph replays of that static step, with the
    peak memory allocated while decoding eagerly. Titan's test-time update at a chunk's end runs
    eagerly between two replays (StaticTitanState.after_step), inside the timed steps. A backbone
    that cannot decode in static shapes says why in its row."""
    from memexp.backbones.static_decode import StaticDecoder

    cuda = bb.device.type == "cuda"
    eager_state = state.clone()
    if cuda:
        torch.cuda.reset_peak_memory_stats(bb.device)
    out = {"eager": f"{median_seconds(lambda: bb.forward(eager_state, [5]), bb.device, steps, warmup=8) * 1e3:.2f} ms"}
    out["peak"] = f"{torch.cuda.max_memory_allocated(bb.device) / 2**30:.2f} GiB" if cuda else "-"
    try:
        dec = StaticDecoder(bb, state, 2 * (steps + 8) + 4)
    except ValueError as e:
        return {**out, "static": f"not static: {e}", "graph": "-"}
    dec.feed(5)
    out["static"] = f"{median_seconds(dec.step, bb.device, steps, warmup=8) * 1e3:.2f} ms"
    if cuda:
        try:
            dec.capture()
            out["graph"] = f"{median_seconds(dec.step, bb.device, steps, warmup=8) * 1e3:.2f} ms"
        except Exception as e:  # noqa: BLE001  (a failed capture is a finding to report, not a crash)
            out["graph"] = f"capture failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    else:
        out["graph"] = "- (no CUDA)"
    return out


def cmd_titan(s: Setup, args) -> int:
    """Full attention (Plain) against Titan-Llama (the schema's defaults: the first 4 layers become
    Titan layers, segments of 512) on Llama-3.2-1B shapes, random weights, bf16: prefill seconds at
    each length (median of timed runs after a warm-up), then decode from that context as the paper
    measures it: median per-token latency over >= 64 steps, eager, in static shapes and as CUDA
    graph replays (see `_decode`), and the peak memory allocated while decoding."""
    from memexp.methods.titan.config import TitanConfig
    from memexp.methods.titan.method import Titan

    model = s.pick(LLAMA32_1B, SMOKE["llama"])
    lengths = [int(x) for x in args.lengths.split(",")] if args.lengths else s.pick([16384, 32768], [256, 512])
    steps = s.pick(64, 8)
    rows = []
    for label in ("full attention", "Titan-Llama"):
        bb = backbone("llama", model, s.device.type, "bfloat16")
        if label == "Titan-Llama":
            cfg = TitanConfig() if not s.smoke else TitanConfig(layers=1, segment_length=64, test_batch=128)
            Titan(cfg).prepare(bb)
        gen = torch.Generator().manual_seed(3)
        for n in lengths:
            ids = torch.randint(1, 258, (n,), generator=gen).tolist()
            prefill = median_seconds(lambda bb=bb, ids=ids: bb.forward(bb.init_state(), ids), bb.device,
                                     s.pick(2, 1), warmup=1)
            st = bb.init_state()
            bb.forward(st, ids)
            d = _decode(bb, st, steps)
            rows.append([label, f"{n:,}", f"{prefill:.3f} s", d["eager"], d["static"], d["graph"], d["peak"]])
            del st
        del bb
        gc.collect()
        if s.device.type == "cuda":
            torch.cuda.empty_cache()
    print(table(["model", "context", "prefill", "decode/token eager", "static shapes", "CUDA graph",
                 "decode peak (eager)"], rows))
    print(f"\npaper (Fig. 4, Table 1): Titan > 20 % faster prefill, decode 0.689x, decode memory 24 % lower "
          f"(CUDA graphs, static ring KV buffer). {steps} decode steps per row; paths: {paths_used()}")
    return 0


COMMANDS = {"env": cmd_env, "kernels": cmd_kernels, "models": cmd_models, "routing": cmd_routing,
            "notebank": cmd_notebank, "titan": cmd_titan}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("section", choices=sorted(COMMANDS))
    p.add_argument("--smoke", action="store_true", help="tiny shapes on this machine's CPU (code paths only)")
    p.add_argument("--lengths", default="", help="notebank / titan: comma-separated context lengths")
    p.add_argument("--repeats", type=int, default=1, help="notebank: timed runs per length and method (default 1)")
    p.add_argument("--budget", type=float, default=240.0, help="notebank: seconds for all lengths (default 240)")
    p.add_argument("--prefill-chunk", type=int, default=16384, help="notebank: backbone.prefill_chunk (default 16384)")
    args = p.parse_args(argv)
    if not args.smoke and not torch.cuda.is_available():
        print(f"gpu_measure {args.section}: no CUDA device; use --smoke for the CPU rehearsal", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    setup = Setup(torch.device("cpu" if args.smoke else "cuda"), args.smoke)
    with torch.no_grad():  # not inference_mode: Titan layers take gradients at test time
        return COMMANDS[args.section](setup, args)


if __name__ == "__main__":
    sys.exit(main())
