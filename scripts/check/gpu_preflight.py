"""Every Triton kernel memexp launches on CUDA, compiled for sm_80 and sm_90 here, without a GPU.

    python scripts/check/gpu_preflight.py                    # the installed triton, sm_80 and sm_90
    python scripts/check/gpu_preflight.py --triton image     # the GPU machine's triton (gpu_image.txt)
    python scripts/check/gpu_preflight.py --targets 90 --backbones gdn --out table.md

Triton's interpreter (TRITON_INTERPRET=1, what the CPU tests run) checks a kernel's arithmetic but
not what the real compiler refuses: tl.dot's shapes and dtypes, layouts, shared memory, registers.
`triton.compile` needs no GPU for a CUDA target (ptxas ships in the triton wheel), so each kernel is
compiled here to PTX and a cubin, and its shared memory is checked against the target's per-block
limit, which the compiler does not check (a launch does, on the GPU, too late).

Which kernels, at which arguments: each op is called the way memexp's dispatch calls it (the
wrappers of kernels/routing and kernels/distinctiveness; memexp.kernels.fla's FLA delta rules,
forward for inference and backward for LoRA training; mamba_ssm's SSD kernels) on CPU tensors of
the backbones' shapes, with triton's launcher replaced by a recorder: the launches come out with
exactly the arguments, constexprs and autotune configs the library itself would pass, instead of
being restated from its source (which changes with each FLA release). An autotuner is not run:
every config it keeps after its own pruning is recorded, since any of them may win on the GPU.
Libraries that read the device at import (FLA sizes its blocks by the GPU's shared memory) see a
stand-in device of the target's capability, shared memory and SM count; so each target is one
worker process. The shapes are read from memexp's own backbone configs (conf/backbone/*.yaml,
memexp.backbones.shapes.KNOWN_CONFIGS, the architectures' config classes), not restated here.

One row per kernel x target x (backbone, op, dtype): its autotune configs compiled / recorded, the
largest shared memory of them against the limit, registers per thread, local memory per thread
(spills; cuobjdump's LOCAL), or the compiler's first error line. Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
IMAGE = HERE / "gpu_image.txt"
VENVS = Path(os.environ.get("MEMEXP_TRITON_VENVS", Path.home() / ".cache" / "memexp" / "triton-venvs"))


@dataclass(frozen=True)
class Target:
    """A CUDA target and what the stand-in device reports for it (the GPU the check machines lend)."""

    capability: int
    gpu: str
    smem_limit: int  # bytes of shared memory one block may use (the opt-in maximum triton's launch checks)
    sms: int


TARGETS = {
    80: Target(80, "NVIDIA A100-SXM4-80GB", 166912, 108),  # 163 KiB per block
    90: Target(90, "NVIDIA H100 80GB HBM3", 232448, 132),  # 227 KiB per block
}


# ---------------------------------------------------------------------------------------- shapes
@dataclass(frozen=True)
class Dims:
    """One backbone's sizes as its dispatched kernels see them."""

    backbone: str
    arch: str
    channels: int  # NoteBank's J: every addressable channel of the backbone
    d_k: int  # a channel's key width
    heads: int = 0  # query / key heads (delta rules) or SSM heads (Mamba-2)
    v_heads: int = 0  # value heads (delta rules)
    k: int = 0  # key width per head (delta rules) or state size N (Mamba-2)
    v: int = 0  # value width per head (delta rules) or head dim P (Mamba-2)
    groups: int = 0  # Mamba-2's B / C groups
    chunk: int = 0  # Mamba-2's SSD chunk length


BACKBONES = ["gdn", "gdn2", "mamba2", "llama32_1b", "qwen35_9b",
             "tiny_gdn_words", "tiny_gdn_random", "tiny_gdn2_random", "tiny_mamba2_random", "tiny_qwen35_random"]


def backbone_dims(name: str) -> Dims:
    """The kernel sizes of conf/backbone/<name>.yaml, parsed by its architecture's own config class."""
    import yaml

    from memexp.backbones.shapes import KNOWN_CONFIGS, arch_shapes
    from memexp.core.registry import ARCHS
    from memexp.core.schema import asset_path

    conf_dir = Path(importlib.import_module("memexp.conf").__path__[0])
    spec = yaml.safe_load((conf_dir / "backbone" / f"{name}.yaml").read_text())
    pretrained = spec.get("pretrained")
    asset = re.fullmatch(r"\$\{memexp_asset:(.+)\}", pretrained or "")
    if pretrained is None:
        fields = dict(spec.get("model") or {})
    elif asset:
        fields = json.loads((Path(asset_path(asset.group(1))) / "config.json").read_text())
    elif pretrained in KNOWN_CONFIGS:
        fields = dict(KNOWN_CONFIGS[pretrained].fields)
    else:
        # Qwen3.5-9B: memexp's HybridConfig defaults are that checkpoint's text config (its
        # docstring), the YAML's `model` only overrides RoPE; Llama's sizes do not matter here.
        fields = dict(spec.get("model") or {})
    arch = spec["arch"]
    conf = ARCHS.get(arch).load_schema().from_dict(fields, where=f"conf/backbone/{name}.yaml")
    shapes = arch_shapes(arch, conf, name, 2, None)
    dims = Dims(name, arch, shapes.channels, shapes.d_k)
    if arch in ("gdn", "gdn2"):
        return dataclasses.replace(dims, heads=conf.num_heads, v_heads=conf.num_v_heads or conf.num_heads,
                                   k=conf.head_dim, v=int(conf.head_dim * conf.expand_v))
    if arch == "qwen35":
        return dataclasses.replace(dims, heads=conf.linear_num_key_heads, v_heads=conf.linear_num_value_heads,
                                   k=conf.linear_key_head_dim, v=conf.linear_value_head_dim)
    if arch == "mamba2":
        return dataclasses.replace(dims, heads=conf.num_heads, k=conf.state_size, v=conf.head_dim,
                                   groups=conf.n_groups, chunk=conf.chunk_size)
    return dims


# ------------------------------------------------------------------------------------ the cases
PREFILL_T = 2048  # a prefill chunk: FLA's chunk kernels (above FLA_RECURRENT_MAX_T tokens)
DECODE_T = 1  # a decode step: FLA's fused-recurrent kernel, mamba_ssm's selective_state_update
NOTES, QUESTION_T = 4096, 37  # routing: archive size, question positions


@dataclass(frozen=True)
class Case:
    """One op call as memexp dispatches it: run `call` under the recorder to get its launches."""

    backbone: str
    op: str
    dtype: str
    library: str  # the module whose absence makes the case 'not installed'
    call: Callable[[], None] = field(compare=False, repr=False)


class NotDispatched(Exception):
    """memexp's dispatch takes its reference ops for this call on this target: no kernel to compile."""


def _delta_rule_call(rule: str, d: Dims, dtype: Any, length: int, backward: bool) -> Callable[[], None]:
    """memexp.kernels.fla.fla_delta_rule as the backbones call it (initial state carried, final state
    kept, q and k normalised before), on CPU tensors; with `backward`, the chunk kernel's backward too
    (LoRA training of a frozen backbone: memexp.kernels.fla keeps such calls on the chunk kernel)."""
    import torch

    def call() -> None:
        import triton

        from memexp.kernels.fla import fla_delta_rule, fla_refuses_backward_on

        # the dispatch's own rule (kernels/gated_delta_rule): a backward FLA refuses on this target
        # and Triton runs memexp's reference ops instead (the stand-in device answers the capability)
        if backward and rule == "gated_delta_rule" and fla_refuses_backward_on(
                torch.cuda.get_device_capability()[0], triton.__version__,
                importlib.util.find_spec("tilelang") is not None):
            raise NotDispatched("memexp's reference ops: FLA refuses this backward on this GPU and Triton "
                                "(its issue 640)")
        shape = (1, length)
        q = torch.randn(*shape, d.heads, d.k, dtype=dtype, requires_grad=backward)
        k = torch.randn(*shape, d.heads, d.k, dtype=dtype)
        v = torch.randn(*shape, d.v_heads, d.v, dtype=dtype)
        if rule == "gated_delta_rule":
            gates = {"g": torch.randn(*shape, d.v_heads), "beta": torch.rand(*shape, d.v_heads, dtype=dtype)}
        else:  # gdn2: per-channel decay and erase gates, per-value write gate
            gates = {"g": torch.randn(*shape, d.heads, d.k), "b": torch.rand(*shape, d.heads, d.k, dtype=dtype),
                     "w": torch.rand(*shape, d.heads, d.v, dtype=dtype)}
        h0 = torch.zeros(1, d.v_heads, d.k, d.v)
        o, _ = fla_delta_rule(rule, q, k, v, gates, None, h0, True, False)
        if backward:
            o.float().sum().backward()

    return call


def _ssd_call(d: Dims, dtype: Any, length: int) -> Callable[[], None]:
    """memexp.kernels.ssd.ssd as the Mamba-2 block calls it: mamba_chunk_scan_combined for a chunk,
    selective_state_update for one decode token (fp32 A, D, dt_bias as the model keeps them)."""
    import torch

    def call() -> None:
        from memexp.kernels.ssd import ssd

        shape = (1, length)
        # the op's own dispatch takes its kernel path for CUDA tensors only; these are CPU ones
        sys.modules["memexp.kernels.ssd"].use_kernels = lambda *a, **k: True
        ssd(torch.randn(*shape, d.heads, d.v, dtype=dtype), torch.randn(*shape, d.heads, dtype=dtype),
            -torch.rand(d.heads), torch.randn(*shape, d.groups, d.k, dtype=dtype),
            torch.randn(*shape, d.groups, d.k, dtype=dtype), D=torch.ones(d.heads), dt_bias=torch.zeros(d.heads),
            initial_state=torch.zeros(1, d.heads, d.v, d.k), chunk_size=d.chunk)

    return call


def _routing_call(d: Dims, width: int) -> Callable[[], None]:
    """NoteBank's router: bf16 addresses [N, J, d_rho] (the archive's dtype), fp32 question queries."""
    import torch

    def call() -> None:
        from memexp.kernels.routing.triton import route_votes_triton

        route_votes_triton(torch.randn(NOTES, d.channels, width, dtype=torch.bfloat16),
                           torch.randn(QUESTION_T, d.channels, width))

    return call


def _distinctiveness_call(d: Dims, heads: int, dtype: Any) -> Callable[[], None]:
    """NoteBank's key distinctiveness: one layer's keys [T, H, d_k] in the backbone's dtype."""
    import torch

    def call() -> None:
        from memexp.kernels.distinctiveness.triton import chunk_distinctiveness_triton

        chunk_distinctiveness_triton(torch.randn(PREFILL_T, heads, d.d_k, dtype=dtype))

    return call


def cases(backbones: list[str], dtypes: list[str], backward: bool) -> Iterator[Case]:
    """Every dispatched Triton op of each backbone, in each dtype a CUDA run may use (bf16 by
    default, fp32 with backbone.dtype=float32)."""
    import torch

    from memexp.methods.notebank.config import NoteBankConfig

    d_rho = NoteBankConfig().address_dim
    for name in backbones:
        d = backbone_dims(name)
        for dt in dtypes:
            dtype = getattr(torch, {"bf16": "bfloat16", "fp32": "float32"}[dt])
            if d.arch in ("gdn", "gdn2", "qwen35"):
                rule = "gdn2" if d.arch == "gdn2" else "gated_delta_rule"
                yield Case(name, f"{rule} chunk", dt, "fla", _delta_rule_call(rule, d, dtype, PREFILL_T, False))
                yield Case(name, f"{rule} fused_recurrent", dt, "fla",
                           _delta_rule_call(rule, d, dtype, DECODE_T, False))
                if backward and dt == "bf16":  # LoRA training runs the backbone at dtype=auto: bf16 on CUDA
                    yield Case(name, f"{rule} chunk fwd+bwd", dt, "fla",
                               _delta_rule_call(rule, d, dtype, PREFILL_T, True))
            if d.arch == "mamba2":
                yield Case(name, "ssd chunk scan", dt, "mamba_ssm", _ssd_call(d, dtype, PREFILL_T))
                yield Case(name, "ssd state update", dt, "mamba_ssm", _ssd_call(d, dtype, DECODE_T))
            if d.channels:  # NoteBank needs recurrent channels (an attention backbone has none)
                heads = d.groups if d.arch == "mamba2" else d.heads  # one layer's channels
                yield Case(name, "distinctiveness", dt, "triton", _distinctiveness_call(d, heads, dtype))
        if d.channels:
            # addresses are bf16 whatever the backbone's dtype; d_rho, or identity addresses (d_k)
            for width in sorted({d_rho or d.d_k, d.d_k}):
                yield Case(name, f"routing d={width}", "bf16", "triton", _routing_call(d, width))


# ------------------------------------------------------------------- the recorder and the device
@dataclass
class Launch:
    fn: Any  # the JITFunction
    args: tuple
    kwargs: dict
    tuned: bool = False  # one of several configs an autotuner benchmarks (and may discard)


def stand_in_device(target: Target) -> None:
    """Make triton's active driver and torch.cuda's queries answer as `target`'s GPU would, for the
    libraries that size their kernels by the device at import (FLA: fla.utils.hardware). Nothing
    is launched through it: the recorder below replaces every launch."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget

    props = {"multiprocessor_count": target.sms, "max_shared_mem": target.smem_limit}
    fake = types.SimpleNamespace(
        get_current_target=lambda: GPUTarget("cuda", target.capability, 32),
        get_current_device=lambda: 0, get_current_stream=lambda device=None: 0,
        get_active_torch_device=lambda: torch.device("cpu"),
        utils=types.SimpleNamespace(get_device_properties=lambda index=0: dict(props)))
    triton.runtime.driver.set_active(fake)
    capability = (target.capability // 10, target.capability % 10)
    torch.cuda.get_device_capability = lambda device=None: capability
    torch.cuda.get_device_name = lambda device=None: target.gpu
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    # mamba_ssm enters `torch.cuda.device(x.device.index)` around its launches; CPU tensors have none
    torch.cuda.device = lambda device=None: contextlib.nullcontext()
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        name=target.gpu, major=capability[0], minor=capability[1], multi_processor_count=target.sms,
        shared_memory_per_block_optin=target.smem_limit, shared_memory_per_block=48 * 1024)


@contextlib.contextmanager
def recording(launches: list[Launch]) -> Iterator[None]:
    """Replace triton's launchers: a JITFunction's launch is recorded instead of compiled and run;
    an Autotuner launches (so records) each config its own pruning keeps, instead of benchmarking
    them. Heuristics wrappers run as they are, so their constexprs reach the record."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    tuning = [False]

    def record(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        launches.append(Launch(self, args, kwargs, tuning[0]))

    def every_config(self: Any, *args: Any, **kwargs: Any) -> None:
        self.nargs = dict(zip(self.arg_names, args))
        configs = self.prune_configs(kwargs)
        tuning[0] = len(configs) > 1  # a single config is launched without benchmarking
        try:
            for config in configs:
                self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            tuning[0] = False
            self.nargs = None

    saved = JITFunction.run, Autotuner.run
    JITFunction.run, Autotuner.run = record, every_config
    try:
        yield
    finally:
        JITFunction.run, Autotuner.run = saved


# --------------------------------------------------------------------------------- compiling
@dataclass
class Compiled:
    error: str = ""
    skippable: bool = False  # what triton's autotuner discards while benchmarking (and then picks another)
    shared: int = 0
    regs: int = 0
    local: int = 0


def _cuobjdump() -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def resources(cubin: bytes) -> tuple[int, int]:
    """(registers per thread, local memory bytes per thread) of a cubin, from cuobjdump (the
    compiled kernel's n_regs / n_spills are filled only when a GPU loads it)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([_cuobjdump(), "--dump-resource-usage", f.name], capture_output=True, text=True,
                              check=True).stdout
    reg = re.search(r"REG:(\d+)", text)
    local = re.search(r"LOCAL:(\d+)", text)
    return int(reg.group(1)) if reg else -1, int(local.group(1)) if local else -1


def first_error_line(e: BaseException) -> str:
    """The compiler's message, first meaningful line (triton's CompilationError puts the source
    excerpt first and the cause last)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip() and not set(ln.strip()) <= set("^~ ")]
    cause = getattr(e, "__cause__", None) or getattr(e, "error_message", None)
    message = (str(cause).strip().splitlines() or [""])[0] if cause else (lines[-1] if lines else "")
    return f"{type(e).__name__}: {message}"[:200]


def compile_launch(launch: Launch, target: Target) -> tuple[tuple, Compiled]:
    """Compile a recorded launch for `target` exactly as JITFunction.run would on that GPU: the same
    binder (specialisation on alignment, divisibility by 16, ints equal to 1), the same packing of
    signature / constexprs / attributes, then triton.compile. Returns (cache key, result)."""
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.compiler import compile as triton_compile
    from triton.runtime.jit import create_function_from_signature

    gpu = GPUTarget("cuda", target.capability, 32)
    backend = make_backend(gpu)
    kwargs = dict(launch.kwargs, debug=launch.kwargs.get("debug", launch.fn.debug) or knobs.runtime.debug)
    for option in ("instrumentation_mode", "fpsan_homomorphic_casts"):  # what run() adds, where it exists
        if hasattr(knobs.compilation, option):
            kwargs[option] = getattr(knobs.compilation, option)
    binder = create_function_from_signature(launch.fn.signature, launch.fn.params, backend)
    bound, specialization, options = binder(*launch.args, **kwargs)
    options, signature, constexprs, attrs = launch.fn._pack_args(backend, kwargs, bound, specialization, options)
    key = (launch.fn, repr(sorted(signature.items())), repr(sorted(constexprs.items(), key=str)), repr(attrs),
           repr(sorted(options.__dict__.items(), key=str)))
    try:
        kernel = triton_compile(ASTSource(launch.fn, signature, constexprs, attrs), target=gpu,
                                options=options.__dict__)
    except Exception as e:  # the compiler's refusal is the finding
        # Autotuner._bench skips a config that fails a static assert or ptxas (then picks another)
        return key, Compiled(error=first_error_line(e), skippable=type(e).__name__ in SKIPPED_BY_AUTOTUNER)
    regs, local = resources(kernel.asm["cubin"])
    shared = int(kernel.metadata.shared)
    if shared <= target.smem_limit:
        return key, Compiled(shared=shared, regs=regs, local=local)
    # what the launch on the GPU raises (OutOfResources), and the autotuner skips too
    return key, Compiled(error=f"shared memory {shared} B > the {target.smem_limit} B one block may use on "
                               f"sm_{target.capability}", skippable=True, shared=shared, regs=regs, local=local)


# the errors triton's Autotuner._bench catches to give a config an infinite time (3.6 to 3.9)
SKIPPED_BY_AUTOTUNER = {"CompileTimeAssertionFailure", "PTXASError"}


def config_label(launch: Launch) -> str:
    keep = ("BLOCK", "BT", "BK", "BV", "BS", "BC", "num_warps", "num_stages")
    return " ".join(f"{k}={v}" for k, v in launch.kwargs.items()
                    if isinstance(v, int) and any(k.startswith(p) for p in keep))


# --------------------------------------------------------------------------------------- worker
def replace_modules(replacements: list[str]) -> None:
    """--replace MODULE=FILE: import FILE as MODULE (a changed copy of a kernel, to check it)."""
    for item in replacements:
        name, _, path = item.partition("=")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


def worker(args: argparse.Namespace) -> int:
    """One target: record every case's launches, compile each distinct one, print a JSON row per
    (case, kernel)."""
    target = TARGETS[args.worker]
    stand_in_device(target)
    replace_modules(args.replace)
    memo: dict[tuple, Compiled] = {}
    for case in cases(args.backbones, args.dtypes, args.backward):
        if args.ops and not any(word in case.op for word in args.ops):
            continue
        row = {"backbone": case.backbone, "op": case.op, "dtype": case.dtype, "target": f"sm_{target.capability}"}
        if importlib.util.find_spec(case.library) is None:
            print(json.dumps({**row, "kernel": "-", "status": f"not installed ({case.library})"}), flush=True)
            continue
        launches: list[Launch] = []
        try:
            with recording(launches):
                case.call()
        except NotDispatched as e:
            print(json.dumps({**row, "kernel": "-", "status": f"not dispatched ({e})"}), flush=True)
            continue
        except Exception as e:  # the op refused these shapes before any kernel: a finding too
            print(json.dumps({**row, "kernel": "-", "status": f"call failed: {first_error_line(e)}"}), flush=True)
            continue
        by_kernel: dict[str, list[Launch]] = {}
        for launch in launches:
            by_kernel.setdefault(launch.fn.__name__, []).append(launch)
        for name, group in by_kernel.items():
            results, seen = [], set()
            t0 = time.perf_counter()
            for launch in group:
                key, result = None, None
                try:
                    key, result = compile_launch(launch, target)
                except Exception as e:  # binding the arguments failed: report, do not stop the others
                    result = Compiled(error=first_error_line(e))
                if key is not None and key in seen:
                    continue
                if key is not None:
                    seen.add(key)
                    result = memo.setdefault(key, result)
                results.append((launch, result))
            print(json.dumps({**row, "kernel": name, **verdict(results), "limit": target.smem_limit,
                              "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
    return 0


def verdict(results: list[tuple[Launch, Compiled]]) -> dict:
    """One kernel's row from its configs' results. A config its autotuner benchmarks and discards
    for a reason the autotuner tolerates (shared memory, ptxas, static assert) is no failure while
    another config of the same call compiles and fits: on the GPU the autotuner picks among those."""
    ok = [r for _, r in results if not r.error]
    failed = [(launch, r) for launch, r in results if r.error]
    fatal = [(launch, r) for launch, r in failed if not (launch.tuned and r.skippable and ok)]
    if fatal:
        status = f"FAIL: {fatal[0][1].error} [{config_label(fatal[0][0])}]"
    elif failed:
        status = f"ok ({len(failed)} config(s) skipped by the autotuner: {failed[0][1].error.split(' > ')[0]})"
    else:
        status = "ok"
    return {"status": status, "configs": f"{len(ok)}/{len(results)}",
            "shared": max((r.shared for r in ok), default=0), "regs": max((r.regs for r in ok), default=0),
            "local": max((r.local for r in ok), default=0)}


# --------------------------------------------------------------------------------------- parent
def image_triton() -> str:
    """The GPU machine's triton, as gpu_image.txt records it ('# triton==X.Y.Z: ...')."""
    match = re.search(r"^#\s*triton==(\S+?):", IMAGE.read_text(), re.M)
    if match is None:
        raise SystemExit(f"gpu-preflight: no '# triton==VERSION:' line in {IMAGE}")
    return match.group(1)


def triton_venv(version: str, wheels: list[Path]) -> Path:
    """A throw-away virtualenv over this Python's packages with triton==`version` (and `wheels`,
    e.g. mamba-ssm's) installed in it; made once, reused after (delete the folder to remake it)."""
    venv = VENVS / version
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", f"triton=={version}"], check=True)
    if wheels:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", *map(str, wheels)], check=True)
    return python


def table(rows: list[dict], triton_version: str) -> str:
    lines = [f"triton {triton_version}; shared memory is the largest of the kernel's compiled configs, "
             "against the target's per-block limit", "",
             "| backbone | op | dtype | target | kernel | status | configs | shared KiB / limit | regs | local B |",
             "|---|---|---|---|---|---|---|---|---:|---:|"]
    for r in rows:
        if "configs" in r:
            smem = f"{r['shared'] / 1024:.1f} / {r['limit'] // 1024}"
            lines.append(f"| {r['backbone']} | {r['op']} | {r['dtype']} | {r['target']} | {r['kernel']} | "
                         f"{r['status']} | {r['configs']} | {smem} | {r['regs']} | {r['local']} |")
        else:
            lines.append(f"| {r['backbone']} | {r['op']} | {r['dtype']} | {r['target']} | - | {r['status']} "
                         "| | | | |")
    return "\n".join(lines) + "\n"


def summary(rows: list[dict]) -> str:
    parts = []
    for target in sorted({r["target"] for r in rows}):
        mine = [r for r in rows if r["target"] == target]
        ok = sum(r["status"].startswith("ok") for r in mine)
        missing = sum(r["status"].startswith("not installed") for r in mine)
        elsewhere = sum(r["status"].startswith("not dispatched") for r in mine)
        parts.append(f"{target}: {ok} of {len(mine)} rows compiled, {len(mine) - ok - missing - elsewhere} failed, "
                     f"{missing} not installed" + (f", {elsewhere} not dispatched" if elsewhere else ""))
    return "; ".join(parts)


def parent(args: argparse.Namespace, argv: list[str]) -> int:
    if args.triton is not None:
        version = image_triton() if args.triton == "image" else args.triton
        python = triton_venv(version, args.wheel)
        rest = strip_option(argv, "--triton")
        rest = strip_option(rest, "--wheel")
        return subprocess.run([str(python), __file__, *rest]).returncode
    import triton

    t0 = time.perf_counter()
    base = [sys.executable, __file__, "--backbones", ",".join(args.backbones), "--dtypes", ",".join(args.dtypes),
            "--ops", ",".join(args.ops),
            "--backward" if args.backward else "--no-backward", *[f"--replace={r}" for r in args.replace]]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("TRITON_INTERPRET", None)  # the interpreter would bypass the compiler this checks
    rows: list[dict] = []
    failed_workers = []
    deadline = time.monotonic() + args.budget
    with tempfile.TemporaryDirectory() as logs:
        # one worker per target (each fakes its own device), side by side; output into files, as a
        # pipe nobody reads while the other worker is waited on would stall its writer
        files = [(Path(logs) / f"{t}.out", Path(logs) / f"{t}.err") for t in args.targets]
        procs = [subprocess.Popen([*base, "--worker", str(t)], stdout=out.open("w"), stderr=err.open("w"), env=env)
                 for t, (out, err) in zip(args.targets, files)]
        for t, proc, (out, err) in zip(args.targets, procs, files):
            cut = ""
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:  # keep the rows it finished; the cut fails the run
                proc.kill()
                proc.wait()
                cut = f"cut at the {args.budget:.0f} s budget"
            rows += [json.loads(ln) for ln in out.read_text().splitlines() if ln.startswith("{")]
            if proc.returncode != 0:
                last = cut or (err.read_text().strip().splitlines() or [""])[-1]
                failed_workers.append(f"sm_{t} worker exit {proc.returncode}: {last}")
    rows.sort(key=lambda r: (r["target"], BACKBONES.index(r["backbone"]), r["op"], r["dtype"]))
    text = table(rows, triton.__version__) + f"\n{summary(rows)}; {time.perf_counter() - t0:.0f} s\n"
    text += "".join(f"\n{w}\n" for w in failed_workers)
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)
    bad = failed_workers or [r for r in rows if not r["status"].startswith(("ok", "not installed", "not dispatched"))]
    return 1 if bad or not rows else 0


def strip_option(argv: list[str], name: str) -> list[str]:
    """argv without `name VALUE` / `name=VALUE` (each occurrence)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == name:
            skip = True
        elif not a.startswith(name + "="):
            out.append(a)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", default="80,90", help="CUDA capabilities, comma-separated (default 80,90)")
    p.add_argument("--backbones", default=",".join(BACKBONES), help="conf/backbone names (default: all listed)")
    p.add_argument("--dtypes", default="bf16,fp32", help="bf16,fp32 (default both)")
    p.add_argument("--ops", default="", help="only the ops whose name holds one of these comma-separated words "
                                             "(routing, distinctiveness, chunk, fused_recurrent, ssd, ...)")
    p.add_argument("--backward", action=argparse.BooleanOptionalAction, default=True,
                   help="also the chunk delta rules' backward in bf16 (LoRA training; default on)")
    p.add_argument("--triton", help="run under this triton version ('image': gpu_image.txt's) in a throw-away "
                                    "virtualenv over this Python's packages")
    p.add_argument("--wheel", type=Path, action="append", default=[],
                   help="with --triton: also install this wheel there (e.g. mamba-ssm's, from .wheelhouse/)")
    p.add_argument("--replace", action="append", default=[], metavar="MODULE=FILE",
                   help="import FILE as MODULE first (a changed copy of a kernel)")
    p.add_argument("--out", type=Path, help="also write the table to this file")
    p.add_argument("--budget", type=float, default=7200.0,
                   help="seconds; workers still compiling then are stopped, their finished rows kept (default 7200)")
    p.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.targets = [int(t) for t in args.targets.split(",")]
    args.backbones = [b for b in args.backbones.split(",") if b]
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.ops = [o for o in args.ops.split(",") if o]
    unknown = [t for t in args.targets if t not in TARGETS] + [b for b in args.backbones if b not in BACKBONES]
    if unknown:
        p.error(f"unknown target or backbone: {', '.join(map(str, unknown))}")
    return worker(args) if args.worker is not None else parent(args, argv)


if __name__ == "__main__":
    sys.exit(main())
