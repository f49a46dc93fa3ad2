"""The one call into FLA's delta-rule kernels, shared by the gated delta rule (GDN, Qwen3.5's
linear layers) and GDN-2's rule.

FLA ships each rule as a chunk kernel and a fused-recurrent one. FLA's layers take the fused-
recurrent kernel for inputs of at most 64 tokens at inference, and so does memexp; but that
kernel has no backward (its backward raises NotImplementedError), so a call whose output autograd
records, LoRA training of a frozen backbone included, always takes the chunk kernel. FLA's layers
decide by `self.training`; memexp decides by the tensors, which also covers a module left in eval
mode while gradients flow through it.
"""

from __future__ import annotations

import torch

from memexp.kernels.dispatch import kernel_module

FLA_RECURRENT_MAX_T = 64  # FLA's own switch from the chunk kernel to the fused-recurrent one

# rule -> (FLA module, chunk kernel, fused-recurrent kernel)
RULES = {
    "gated_delta_rule": ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"),
    "gdn2": ("fla.ops.gdn2", "chunk_gdn2", "fused_recurrent_gdn2"),
}


def needs_backward(*tensors: torch.Tensor) -> bool:
    """Whether autograd records an op on `tensors` (grad mode on and any of them requires grad)."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def fla_refuses_backward_on(capability_major: int, triton_version: str, tilelang: bool) -> bool:
    """Whether FLA raises in its gated chunk backward on a GPU of this compute capability with this
    Triton: on Hopper (9.x) with Triton >= 3.4.0 and < 3.7.1, chunk_bwd_dqkwg gives wrong gradients
    (FLA's issue 640), so FLA refuses it unless tilelang is installed to serve it instead."""
    from packaging.version import Version

    return capability_major == 9 and Version("3.4.0") <= Version(triton_version) < Version("3.7.1") and not tilelang


def fla_refuses_backward(rule: str, *tensors: torch.Tensor) -> bool:
    """A call of `rule` on CUDA `tensors` that needs a backward FLA would refuse (the GPU image's
    Triton is 3.6.0, on H100 and H200; scripts/check/gpu_preflight.py found it): such a call takes
    memexp's reference ops instead, which are correct, only slower. GDN-2's rule is not refused."""
    if rule != "gated_delta_rule" or not tensors[0].is_cuda or not needs_backward(*tensors):
        return False
    import importlib.metadata
    import importlib.util

    major = torch.cuda.get_device_capability(tensors[0].device)[0]
    return fla_refuses_backward_on(major, importlib.metadata.version("triton"),
                                   importlib.util.find_spec("tilelang") is not None)


def fla_kernel_name(rule: str, length: int, *tensors: torch.Tensor) -> str:
    """The FLA kernel a call of `rule` over `length` tokens on `tensors` runs: fused-recurrent for
    short inputs that need no backward, chunk otherwise."""
    if rule not in RULES:
        raise ValueError(f"rule={rule!r}: allowed values are {', '.join(RULES)}")
    _, chunk, fused_recurrent = RULES[rule]
    return fused_recurrent if length <= FLA_RECURRENT_MAX_T and not needs_backward(*tensors) else chunk


def fla_delta_rule(
    rule: str,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    gates: dict[str, torch.Tensor],
    scale: float | None,
    initial_state: torch.Tensor | None,
    output_final_state: bool,
    use_qk_l2norm: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run `rule` ('gated_delta_rule' or 'gdn2') on FLA's kernels.

    `gates` are the rule's gate tensors by FLA's argument names, the log-decay `g` first
    ({'g', 'beta'} or {'g', 'b', 'w'}): `g` is passed in fp32 (the kernels accumulate decays in
    fp32), the others in v's dtype; the initial state [B, HV, K, V] in fp32. Returns FLA's
    (output, final state)."""
    name = fla_kernel_name(rule, q.shape[1], q, k, v, *gates.values())
    kernel = getattr(kernel_module(RULES[rule][0]), name)
    cast = {key: t.float() if key == "g" else t.to(v.dtype) for key, t in gates.items()}
    h0 = None if initial_state is None else initial_state.float().contiguous()
    return kernel(q=q, k=k, v=v, **cast, scale=scale, initial_state=h0, output_final_state=output_final_state,
                  use_qk_l2norm_in_kernel=use_qk_l2norm)
