"""Per-layer values of the Titan memories, read through forward hooks (the layers expose none).

For each Titan layer with a memory, over the last forward while `collect` is on:

- theta: mean step size max_lr * sigmoid(Linear_theta(k)) over tokens and KV heads;
- eta, alpha: mean momentum and decay sigmoid(Linear(mean chunk key)) over chunks and heads;
- lambda: mean gate sigmoid(W_lambda h + b_lambda) over tokens, heads and channels (before the
  gate is zeroed in the first segment);
- inner_loss_w0, inner_loss: the key-value reconstruction loss mean_d (M(k d^-1/4) - v)^2 over the
  call's tokens, at the slow weights W0 and at the fast weights after the call; their gap is
  what the test-time updates stored (the per-chunk, theta-weighted loss of the update itself is
  computed inside the memory and not exposed).

Keys are `layer<i>/<name>`, the names W&B shows.
"""

from __future__ import annotations

import torch
from torch import nn


class InnerStats:
    def __init__(self, modules: nn.Module) -> None:
        self.values: dict[str, float] = {}
        self.collect = False
        self._handles = []
        for index, block in modules.layers.items():
            memory = getattr(block, "memory", None)
            if memory is None:
                continue
            prefix = f"layer{index}/"
            self._hook(memory.theta, prefix + "theta", memory.max_lr)
            self._hook(memory.eta, prefix + "eta")
            self._hook(memory.alpha, prefix + "alpha")
            self._hook(block.gate, prefix + "lambda")
            self._handles.append(memory.register_forward_hook(self._loss_hook(prefix)))

    def _hook(self, linear: nn.Module, key: str, scale: float = 1.0) -> None:
        def hook(module, args, output):
            if self.collect and output.numel():
                self.values[key] = scale * torch.sigmoid(output.detach().float()).mean().item()

        self._handles.append(linear.register_forward_hook(hook))

    def _loss_hook(self, prefix: str):
        from memexp.methods.titan.memory import mlp

        @torch.no_grad()
        def hook(memory, args, output):
            if not self.collect:
                return
            _, k, v, state, _ = args
            B, d = k.shape[0], k.shape[-1]
            keys = (k.float() * d ** -0.25).transpose(1, 2)  # [B, Hkv, T, d]
            values = v.float().transpose(1, 2)
            slow = tuple(w.float().expand(B, *w.shape) for w in memory.slow)
            self.values[prefix + "inner_loss_w0"] = (mlp(slow, keys) - values).pow(2).mean().item()
            if state.fast is not None:
                self.values[prefix + "inner_loss"] = (mlp(state.fast, keys) - values).pow(2).mean().item()

        return hook

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
