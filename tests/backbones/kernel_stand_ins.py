"""Stand-ins for the CUDA kernel libraries memexp dispatches to, so their call sites run on CPU.

Each stand-in has the upstream function's exact signature (no **kwargs: a misnamed argument
fails), enforces the checks its entry point makes (layouts, strides, dtypes, shapes, in-place
state updates) and computes what upstream's reference computes. `install` routes memexp's
kernel branches to them; what a test then compares is memexp's glue, not the kernels.
"""

from __future__ import annotations

import importlib
import sys
import types

import torch
import torch.nn.functional as F

from memexp.kernels import dispatch
from memexp.kernels.ssd import recurrent_ssd_ref, step_sizes


def conv_ref(x, weight, bias, initial, activation):
    """Upstream's reference: x [B, D, L] (with the initial window prepended) in the weight dtype."""
    xw = x.to(weight.dtype)
    if initial is None:
        out = F.conv1d(xw, weight.unsqueeze(1), bias, padding=weight.shape[1] - 1, groups=weight.shape[0])
    else:
        xw = torch.cat([initial.to(weight.dtype), xw], dim=-1)
        out = F.conv1d(xw, weight.unsqueeze(1), bias, groups=weight.shape[0])
    out = out[..., :x.shape[-1]]
    return (F.silu(out) if activation in ("silu", "swish") else out).to(x.dtype), xw


def causal_conv1d_module(calls: list[str]) -> types.ModuleType:
    def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
                         final_states_out=None, activation=None):
        assert activation in (None, "silu", "swish")
        B, D, L = x.shape
        W = weight.shape[-1]
        assert weight.shape == (D, W) and 2 <= W <= 4
        assert x.stride(2) == 1 or x.stride(1) == 1
        channel_last = x.stride(1) == 1 and x.stride(2) > 1
        if channel_last:
            assert D % 8 == 0 and x.stride(2) % 8 == 0 and x.stride(0) % 8 == 0
        if bias is not None:
            assert bias.dtype == weight.dtype and bias.shape == (D,) and bias.stride(-1) == 1
        if initial_states is not None:
            assert channel_last, "initial_states is only supported for channel last layout"
            assert initial_states.dtype == x.dtype and initial_states.shape == (B, D, W - 1)
            assert initial_states.stride(1) == 1
        if return_final_states:
            assert x.stride(1) == 1, "Only channel-last layout support returning final_states_out"
        calls.append(f"fn:{L}")
        out, xw = conv_ref(x, weight, bias, initial_states, activation)
        result = torch.empty_like(x).copy_(out)
        if not return_final_states:
            return result
        final = torch.empty(B, W - 1, D, dtype=x.dtype).transpose(1, 2)
        final.copy_(xw[..., -(W - 1):])
        return result, final

    def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None):
        assert activation in (None, "silu", "swish") and cache_seqlens is None
        squeeze = x.dim() == 2
        x3 = x.unsqueeze(-1) if squeeze else x
        B, D, L = x3.shape
        W = weight.shape[-1]
        assert conv_state.dtype == x.dtype and conv_state.shape[:2] == (B, D) and conv_state.shape[2] >= W - 1
        assert weight.shape == (D, W) and 2 <= W <= 4
        if bias is not None:
            assert bias.dtype == weight.dtype
        calls.append(f"update:{L}")
        joined = torch.cat([conv_state, x3], dim=-1).to(weight.dtype)
        conv_state.copy_(joined[..., -conv_state.shape[2]:].to(conv_state.dtype))
        out = F.conv1d(joined, weight.unsqueeze(1), bias, groups=D)[..., -L:]
        out = (F.silu(out) if activation in ("silu", "swish") else out).to(x.dtype)
        return out.squeeze(-1) if squeeze else out

    module = types.ModuleType("causal_conv1d")
    module.causal_conv1d_fn = causal_conv1d_fn
    module.causal_conv1d_update = causal_conv1d_update
    return module


def mamba_ssm_modules(calls: list[str]) -> dict[str, types.ModuleType]:
    def mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                                  seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                                  return_final_states=False, return_varlen_states=False):
        assert z is None and seq_idx is None and A.dtype == torch.float32
        assert initial_states is None or (initial_states.dtype == torch.float32 and initial_states.is_contiguous())
        calls.append(f"chunk:{x.shape[1]}")
        y, final = recurrent_ssd_ref(x, step_sizes(dt, dt_bias, dt_softplus, dt_limit), A, B, C, D, initial_states)
        return (y, final) if return_final_states else y

    def selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False):
        batch, H, P, N = state.shape
        G = B.shape[1]
        assert x.shape == dt.shape == (batch, H, P) and A.shape == (H, P, N)
        assert B.shape == C.shape == (batch, G, N) and H % G == 0 and z is None
        assert D is None or D.shape == (H, P)
        assert dt_bias is None or dt_bias.shape == (H, P)
        calls.append("step")
        step = dt.float() + (0 if dt_bias is None else dt_bias.float())
        step = torch.nn.functional.softplus(step) if dt_softplus else step
        Bh, Ch = (t.float().repeat_interleave(H // G, dim=1) for t in (B, C))
        new = state.float() * torch.exp(A.float() * step[..., None]) + (step * x.float())[..., None] * Bh[:, :, None]
        state.copy_(new)
        out = (new * Ch[:, :, None]).sum(-1) + (0 if D is None else x.float() * D.float())
        return out.to(x.dtype)

    modules = {name: types.ModuleType(name) for name in ("mamba_ssm", "mamba_ssm.ops", "mamba_ssm.ops.triton")}
    for name, fn in (("ssd_combined", mamba_chunk_scan_combined), ("selective_state_update", selective_state_update)):
        module = types.ModuleType(f"mamba_ssm.ops.triton.{name}")
        setattr(module, fn.__name__, fn)
        modules[module.__name__] = module
    return modules


class _NoBackward(torch.autograd.Function):
    """What FLA's fused-recurrent kernels are to autograd: a forward whose backward raises."""

    @staticmethod
    def forward(ctx, fn, *tensors):
        return fn(*tensors)

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("Backward pass is not implemented yet (FLA's fused_recurrent kernels)")


def _l2norm_in_kernel(x):
    """FLA's in-kernel L2 norm: x / sqrt(sum(x^2) + 1e-6), in fp32."""
    x = x.float()
    return x / torch.sqrt(x.square().sum(-1, keepdim=True) + 1e-6)


def fla_modules(calls: list[str]) -> dict[str, types.ModuleType]:
    """fla.ops.gated_delta_rule and fla.ops.gdn2 with their chunk and fused-recurrent entry
    points, computed by FLA's own naive references (imported before the stand-ins take the
    modules' places); each call appends '<rule>.<kernel>:<T>'."""
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule
    from fla.ops.gdn2.naive import naive_recurrent_gdn2

    def checked(q, k, v, g, gates, initial_state):
        B, T, H, K = q.shape
        HV = v.shape[2]
        assert k.shape == q.shape and v.shape[:2] == (B, T) and HV % H == 0
        assert g.dtype == torch.float32 and g.shape[:3] == (B, T, HV)
        assert all(t.dtype == v.dtype for t in gates), "FLA takes the gates in the value dtype"
        if initial_state is not None:
            assert initial_state.dtype == torch.float32 and initial_state.is_contiguous()
            assert initial_state.shape == (B, HV, K, v.shape[-1])

    def gdn(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel):
        checked(q, k, v, g, (beta,), initial_state)
        if use_qk_l2norm_in_kernel:
            q, k = _l2norm_in_kernel(q), _l2norm_in_kernel(k)
        G = v.shape[2] // q.shape[2]  # grouped value heads: value head j reads q/k head j // G
        q, k = (t.repeat_interleave(G, dim=2) for t in (q, k))
        o, final = naive_recurrent_gated_delta_rule(q, k, v, beta, g, scale, initial_state, output_final_state)
        return o.to(v.dtype), final

    def gdn2(q, k, v, g, b, w, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel):
        checked(q, k, v, g, (b, w), initial_state)
        if use_qk_l2norm_in_kernel:
            q, k = _l2norm_in_kernel(q), _l2norm_in_kernel(k)
        o, final = naive_recurrent_gdn2(q, k, v, g, b, w, scale, initial_state, output_final_state)
        return o.to(v.dtype), final

    def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, cu_seqlens=None):
        assert cu_seqlens is None
        calls.append(f"gated_delta_rule.chunk:{q.shape[1]}")
        return gdn(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel)

    def fused_recurrent_gated_delta_rule(q, k, v, g=None, beta=None, scale=None, initial_state=None,
                                         output_final_state=False, use_qk_l2norm_in_kernel=False, cu_seqlens=None):
        assert cu_seqlens is None
        calls.append(f"gated_delta_rule.fused_recurrent:{q.shape[1]}")
        return _NoBackward.apply(lambda *t: gdn(*t, scale, initial_state, output_final_state,
                                                use_qk_l2norm_in_kernel), q, k, v, g, beta)

    def chunk_gdn2(q, k, v, g, b, w, scale=None, initial_state=None, output_final_state=False,
                   use_qk_l2norm_in_kernel=False, cu_seqlens=None):
        assert cu_seqlens is None
        calls.append(f"gdn2.chunk:{q.shape[1]}")
        return gdn2(q, k, v, g, b, w, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel)

    def fused_recurrent_gdn2(q, k, v, g, b, w, scale=None, initial_state=None, output_final_state=False,
                             use_qk_l2norm_in_kernel=False, cu_seqlens=None):
        assert cu_seqlens is None
        calls.append(f"gdn2.fused_recurrent:{q.shape[1]}")
        return _NoBackward.apply(lambda *t: gdn2(*t, scale, initial_state, output_final_state,
                                                 use_qk_l2norm_in_kernel), q, k, v, g, b, w)

    modules = {name: types.ModuleType(name) for name in ("fla", "fla.ops")}
    for name, fns in (("gated_delta_rule", (chunk_gated_delta_rule, fused_recurrent_gated_delta_rule)),
                      ("gdn2", (chunk_gdn2, fused_recurrent_gdn2))):
        module = types.ModuleType(f"fla.ops.{name}")
        for fn in fns:
            setattr(module, fn.__name__, fn)
        modules[module.__name__] = module
    return modules


# library -> memexp's ops that dispatch to it
DISPATCHING_OPS = {"causal_conv1d": ("short_conv",), "mamba_ssm": ("ssd",), "fla": ("gated_delta_rule", "gdn2_rule")}


def install(monkeypatch, libraries=("causal_conv1d", "mamba_ssm")) -> list[str]:
    """Stand-ins for `libraries` in sys.modules and memexp's kernel branches routed to them on
    CPU (unless kernels=torch). Returns the list each served call is appended to."""
    calls: list[str] = []
    modules = {}
    if "causal_conv1d" in libraries:
        modules["causal_conv1d"] = causal_conv1d_module(calls)
    if "mamba_ssm" in libraries:
        modules.update(mamba_ssm_modules(calls))
    if "fla" in libraries:
        modules.update(fla_modules(calls))
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    for op in (op for ops in DISPATCHING_OPS.values() for op in ops):
        monkeypatch.setattr(importlib.import_module(f"memexp.kernels.{op}"), "use_kernels",
                            lambda x, library="triton", required=True: (
                                library in libraries and dispatch.kernels_mode() != "torch"))
    return calls


def on_torch(fn):
    """`fn()` with kernels=torch (the reference path), restoring the mode after."""
    previous = dispatch.kernels_mode()
    dispatch.set_kernels("torch")
    try:
        return fn()
    finally:
        dispatch.set_kernels(previous)
