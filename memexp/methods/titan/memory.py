"""The neural memory of a Titan layer: one MLP per KV head whose weights are trained at test
time on the layer's own keys and values, chunk by chunk (Titan-Llama §3.2; the authors' code
fills in what the paper leaves open: the README's "Titan-Llama" section says which is which).

    M(x) = GELU(GELU(x W1) W2) W3          W1, W2, W3 [d, d] per KV head, x @ W layout, exact GELU
    W0 = the learned slow weights, initialised W1 = W2 = I, W3 = 4 I (M(x) ~ x near 0)

Write, once per complete chunk c of C tokens (chunks aligned to absolute positions):

    L_c     = sum_{t in c} theta_t * mean_d (M(k_t) - v_t)^2      (gradient in closed form)
    g_c     = softclamp(dL_c / dW at the test-time batch's anchor), per matrix: g tanh(|g|) / |g|
    S_c     = eta_c S_{c-1} - g_c
    W_c     = (1 - alpha_c) W_{c-1} + alpha_c W0 + S_c           (decay_target="zero": no alpha W0 term)

with theta_t = max_lr * sigmoid(Linear(k_t)) per token and head, eta_c, alpha_c = sigmoid(Linear(mean
of chunk c's keys)) per chunk and head, all from the concatenation over heads of the keys. The
anchor is the fast weights at the start of the test-time batch (`test_batch` tokens, whole chunks,
aligned to absolute positions): every chunk of a batch takes its gradient there, while momentum and
decay still run chunk by chunk; the anchor moves to W_c when chunk c ends a batch.

Read: a query in chunk w reads M with the weights after all strictly earlier chunks (W0 in chunk 0,
where the layer zeroes the read and its gate). Queries and keys enter scaled by d^-1/4; each KV head's
memory is read by the query heads of its GQA group.

One implementation serves the streaming form (any split of the tokens, one at a time included) and
the training form (all complete chunks of a call: the gradients of a batch's chunks in one batched
product, then the elementwise momentum / decay recurrence), so the two agree by construction and the
tests check both against a per-chunk reference written with autograd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]

W3_INIT = 4.0  # GELU(x) ~ x / 2 near 0, so two GELUs halve twice: W3 = 4 I makes M(x) ~ x


def gelu_grad(x: torch.Tensor) -> torch.Tensor:
    """d GELU(x) / dx for the exact (erf) GELU: Phi(x) + x phi(x)."""
    cdf = 0.5 * (1.0 + torch.erf(x * 2.0 ** -0.5))
    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return cdf + x * pdf


def mlp(weights: Weights, x: torch.Tensor) -> torch.Tensor:
    """M(x) = GELU(GELU(x W1) W2) W3. weights: three [..., d, d]; x [..., n, d] -> [..., n, d]."""
    w1, w2, w3 = weights
    return F.gelu(F.gelu(x @ w1) @ w2) @ w3


def inner_grads(weights: Weights, keys: torch.Tensor, values: torch.Tensor, theta: torch.Tensor) -> Weights:
    """Closed-form gradient of L = sum_t theta_t * mean_d (M(k_t) - v_t)^2 w.r.t. W1, W2, W3.

    weights: three [..., d, d] (broadcast against the leading dims of keys); keys, values
    [..., C, d]; theta [..., C]. Returns three [..., d, d] (the broadcast leading dims).
    """
    w1, w2, w3 = weights
    z1 = keys @ w1
    a1 = F.gelu(z1)
    z2 = a1 @ w2
    a2 = F.gelu(z2)
    pred = a2 @ w3
    g_pred = (2.0 / values.shape[-1]) * theta[..., None] * (pred - values)  # dL / d pred [..., C, d]
    g3 = a2.transpose(-1, -2) @ g_pred
    g_z2 = (g_pred @ w3.transpose(-1, -2)) * gelu_grad(z2)
    g2 = a1.transpose(-1, -2) @ g_z2
    g_z1 = (g_z2 @ w2.transpose(-1, -2)) * gelu_grad(z1)
    g1 = keys.transpose(-1, -2) @ g_z1
    return g1, g2, g3


def soft_clamp(g: torch.Tensor, max_norm: float = 1.0) -> torch.Tensor:
    """g [..., d, d] scaled per matrix to Frobenius norm max_norm * tanh(|g| / max_norm) (< max_norm);
    a zero gradient stays zero."""
    norm = g.norm(dim=(-2, -1), keepdim=True)
    return g * (max_norm * torch.tanh(norm / max_norm) / norm.clamp_min(torch.finfo(norm.dtype).tiny))


@dataclass
class MemoryState:
    """One layer's memory between forward calls, in the memory's dtype (NeuralMemory.dtype).

    pending_k, pending_v [B, Hkv, r, d]: the scaled keys and raw values of the incomplete chunk
    (r = position mod C), the first r slots of buffers that decoding fills in place (one slot per
    token, never a copy of the chunk so far; a buffer grows to a whole chunk once per chunk). fast,
    momentum, anchor: three [B, Hkv, d, d] each, or None before the first complete chunk (then W0,
    zeros and W0: the slow weights are read live, which keeps the training form differentiable
    w.r.t. them). `slow` is the layer's W0 itself ([Hkv, d, d] x3, shared, not copied, not
    counted): the rescale pulls the fast weights toward it.
    """

    buffer_k: torch.Tensor
    buffer_v: torch.Tensor
    slow: Weights
    fast: Weights | None = None
    momentum: Weights | None = None
    anchor: Weights | None = None
    filled: int = 0  # slots of the buffers that hold the pending chunk

    @property
    def pending_k(self) -> torch.Tensor:
        return self.buffer_k[:, :, :self.filled]

    @property
    def pending_v(self) -> torch.Tensor:
        return self.buffer_v[:, :, :self.filled]

    def set_pending(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """The pending chunk becomes `keys`, `values` [B, Hkv, r, d] (tensors of their own)."""
        self.buffer_k, self.buffer_v, self.filled = keys, values, keys.shape[2]

    def append_pending(self, keys: torch.Tensor, values: torch.Tensor, chunk: int) -> None:
        """Write [B, Hkv, t, d] after the pending tokens, in place (no autograd: decoding); the
        chunk must not complete."""
        r, t = self.filled, keys.shape[2]
        if self.buffer_k.shape[2] < r + t:
            grown_k = self.buffer_k.new_empty(*self.buffer_k.shape[:2], chunk, self.buffer_k.shape[3])
            grown_v = torch.empty_like(grown_k)
            grown_k[:, :, :r], grown_v[:, :, :r] = self.pending_k, self.pending_v
            self.buffer_k, self.buffer_v = grown_k, grown_v
        self.buffer_k[:, :, r:r + t], self.buffer_v[:, :, r:r + t] = keys, values
        self.filled = r + t

    def _owned(self) -> list[torch.Tensor]:
        out = [self.pending_k, self.pending_v]
        for group in (self.fast, self.momentum, self.anchor):
            out += list(group or ())
        return out

    def clone(self) -> "MemoryState":
        def copy(group: Weights | None) -> Weights | None:
            return None if group is None else tuple(t.clone() for t in group)

        return MemoryState(self.pending_k.clone(), self.pending_v.clone(), self.slow, copy(self.fast),
                           copy(self.momentum), copy(self.anchor), self.filled)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._owned())

    def scale_recurrent(self, lam: float) -> None:
        """The episodic part of the memory times lam: W <- W0 + lam (W - W0) for the fast weights and
        the anchor, S <- lam S. lam = 0 gives back the initial weights (the chunk positions, the
        pending chunk and the segment's KV are kept); lam = 1 changes nothing."""
        with torch.no_grad():
            if self.fast is not None:
                self.fast = tuple(w0 + lam * (w - w0) for w, w0 in zip(self.fast, self.slow))
                self.anchor = tuple(w0 + lam * (w - w0) for w, w0 in zip(self.anchor, self.slow))
                self.momentum = tuple(lam * s for s in self.momentum)


class NeuralMemory(nn.Module):
    """The memories of one layer's KV heads, with their rate projections.

    Parameters (the trainable outer weights): w1, w2, w3 [Hkv, d, d] (W0); theta, eta, alpha:
    Linear(Hkv * d -> Hkv) with bias each (PyTorch's default init: rates near 0.5 at the start).
    """

    def __init__(self, kv_heads: int, head_dim: int, chunk: int, test_batch: int, max_lr: float,
                 decay_target: str = "slow_weights") -> None:
        super().__init__()
        if test_batch % chunk:
            raise ValueError(f"test_batch={test_batch} must be a multiple of the chunk length {chunk}")
        self.kv_heads, self.head_dim, self.chunk, self.test_batch = kv_heads, head_dim, chunk, test_batch
        self.max_lr, self.decay_target = float(max_lr), decay_target
        eye = torch.eye(head_dim).expand(kv_heads, head_dim, head_dim)
        self.w1 = nn.Parameter(eye.clone())
        self.w2 = nn.Parameter(eye.clone())
        self.w3 = nn.Parameter(W3_INIT * eye)
        width = kv_heads * head_dim
        self.theta = nn.Linear(width, kv_heads)
        self.eta = nn.Linear(width, kv_heads)
        self.alpha = nn.Linear(width, kv_heads)
        # Training curves (TitanModules.record_stats): detached means of the last call's rates and of
        # the inner loss before the update; None (the default) computes nothing extra.
        self.stats: dict[str, torch.Tensor] | None = None

    @property
    def slow(self) -> Weights:
        return self.w1, self.w2, self.w3

    @property
    def dtype(self) -> torch.dtype:
        """The parameters' dtype: the memory computes and keeps its state in it (fp32 by default,
        bf16 with method.memory_dtype=bfloat16, fp64 in the gradient checks)."""
        return self.w1.dtype

    def init_state(self, batch: int, device: torch.device) -> MemoryState:
        empty = torch.zeros(batch, self.kv_heads, 0, self.head_dim, device=device, dtype=self.dtype)
        return MemoryState(empty, empty.clone(), tuple(w.detach() for w in self.slow))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state: MemoryState,
                start: int) -> torch.Tensor:
        """Read for the queries, then write the chunks this call completes.

        q [B, T, H, d] and k [B, T, Hkv, d] (rotated or not: the caller's choice), unscaled; v [B, T,
        Hkv, d] raw values; `start` the absolute position of the first token (state continues from
        it). Returns M(q d^-1/4) [B, T, H, d] in `self.dtype`, each token read with the weights after every
        chunk strictly before its own; `state` advances in place.
        """
        B, T, H, d = q.shape
        C, r = self.chunk, state.filled
        if start % C != r:
            raise ValueError(f"memory state holds {r} pending tokens but the call starts at position {start} "
                             f"(chunk length {C})")
        scale = d ** -0.25
        new_k, new_v = (k.to(self.dtype) * scale).transpose(1, 2), v.to(self.dtype).transpose(1, 2)
        before = self._current(state, B)
        if r + T < C and not (torch.is_grad_enabled() and (new_k.requires_grad or new_v.requires_grad)):
            # no chunk completes (decoding): the tokens go into the pending buffers in place
            state.append_pending(new_k, new_v, C)
            return self._read(q.to(self.dtype) * scale, before, [], r)
        keys = torch.cat([state.pending_k, new_k], dim=2)
        values = torch.cat([state.pending_v, new_v], dim=2)
        n = keys.shape[2] // C
        timeline = self._absorb(state, keys[:, :, :n * C].unflatten(2, (n, C)),
                                values[:, :, :n * C].unflatten(2, (n, C)), (start - r) // C)
        state.set_pending(keys[:, :, n * C:].clone(), values[:, :, n * C:].clone())
        return self._read(q.to(self.dtype) * scale, before, timeline, r)

    def static_state(self, state: MemoryState) -> MemoryState:
        """`state` in fixed tensors for static decoding: buffers of one whole chunk holding the pending
        tokens in their first slots, and the fast weights, momentum and anchor materialised (W0, zeros
        and W0 before the first chunk, the values the streaming form reads in their place)."""
        B = state.buffer_k.shape[0]
        buffer_k = state.buffer_k.new_zeros(B, self.kv_heads, self.chunk, self.head_dim)
        buffer_v = torch.zeros_like(buffer_k)
        buffer_k[:, :, :state.filled], buffer_v[:, :, :state.filled] = state.pending_k, state.pending_v
        fast = tuple(w.clone() for w in self._current(state, B))
        anchor = tuple(w.clone() for w in (state.anchor if state.anchor is not None else fast))
        momentum = tuple(m.clone() for m in state.momentum) if state.momentum is not None else \
            tuple(torch.zeros_like(w) for w in fast)
        return MemoryState(buffer_k, buffer_v, state.slow, fast, momentum, anchor, state.filled)

    def static_step(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state: MemoryState,
                    slot: torch.Tensor) -> torch.Tensor:
        """One decode token on a `static_state`: written into pending slot `slot` (a device index [1],
        position mod C) and read with the current fast weights, with no host synchronisation.
        q [B, 1, H, d], k, v [B, 1, Hkv, d] as in `forward`; -> [B, 1, H, d] in `self.dtype`."""
        scale = q.shape[-1] ** -0.25
        state.buffer_k.index_copy_(2, slot, (k.to(self.dtype) * scale).transpose(1, 2))
        state.buffer_v.index_copy_(2, slot, v.to(self.dtype).transpose(1, 2))
        return self._read(q.to(self.dtype) * scale, state.fast, [], 0)

    def absorb_static(self, state: MemoryState, chunk_index: int) -> None:
        """Write the full pending chunk of a `static_state` (its `chunk_index`-th chunk) exactly as
        `forward` writes a completed chunk, keeping the fixed tensors: the new weights are copied in."""
        fixed = (state.fast, state.momentum, state.anchor)
        self._absorb(state, state.buffer_k[:, :, None], state.buffer_v[:, :, None], chunk_index)
        for group_fixed, group_new in zip(fixed, (state.fast, state.momentum, state.anchor)):
            for old, new in zip(group_fixed, group_new):
                old.copy_(new)
        state.fast, state.momentum, state.anchor = fixed

    def _current(self, state: MemoryState, batch: int) -> Weights:
        if state.fast is not None:
            return state.fast
        return tuple(w.to(self.dtype).expand(batch, *w.shape) for w in self.slow)

    def _read(self, q: torch.Tensor, before: Weights, timeline: list[Weights], r: int) -> torch.Tensor:
        """q [B, T, H, d] scaled; `before` the weights of the call's first chunk, timeline[j] those after
        its j-th completed chunk; r the first token's offset in its chunk. -> [B, T, H, d]."""
        B, T, H, d = q.shape
        C, Hk = self.chunk, self.kv_heads
        nq = (r + T + C - 1) // C  # chunks the queries touch
        if nq == 1:  # one chunk's weights (decoding): no padding to a whole chunk, no chunk-sized work
            grouped = q.view(B, T, Hk, H // Hk, d).permute(0, 2, 3, 1, 4).reshape(B, Hk, -1, d)
            out = mlp(before, grouped).view(B, Hk, H // Hk, T, d).permute(0, 3, 1, 2, 4)
            return out.reshape(B, T, H, d)
        weights = tuple(torch.stack([w[m] for w in [before, *timeline][:nq]], dim=2) for m in range(3))
        padded = F.pad(q, (0, 0, 0, 0, r, nq * C - r - T))  # [B, nq C, H, d], chunk-aligned
        # [B, nq, C, Hk, g, d] -> [B, Hk, nq, g C, d]: a KV head's memory reads its whole GQA group at once
        grouped = padded.view(B, nq, C, Hk, H // Hk, d).permute(0, 3, 1, 4, 2, 5).reshape(B, Hk, nq, -1, d)
        out = mlp(weights, grouped).view(B, Hk, nq, H // Hk, C, d).permute(0, 2, 4, 1, 3, 5)
        return out.reshape(B, nq * C, H, d)[:, r:r + T]

    def _absorb(self, state: MemoryState, keys: torch.Tensor, values: torch.Tensor, first: int) -> list[Weights]:
        """Write n complete chunks into `state`. keys, values [B, Hkv, n, C, d] (keys scaled); `first`
        the absolute index of the first chunk. Returns the fast weights after each chunk (n entries)."""
        B, Hk, n, C, d = keys.shape
        if n == 0:
            return []
        flat = keys.permute(0, 2, 3, 1, 4).reshape(B, n, C, Hk * d)  # keys of all heads side by side
        theta = (self.max_lr * torch.sigmoid(self.theta(flat))).permute(0, 3, 1, 2)  # [B, Hk, n, C]
        pooled = flat.mean(dim=2)  # [B, n, Hk d]
        eta = torch.sigmoid(self.eta(pooled)).transpose(1, 2)[..., None, None]  # [B, Hk, n, 1, 1]
        alpha = torch.sigmoid(self.alpha(pooled)).transpose(1, 2)[..., None, None]
        slow = tuple(w.to(self.dtype) for w in self.slow)
        fast = self._current(state, B)
        anchor = state.anchor if state.anchor is not None else fast
        momentum = state.momentum if state.momentum is not None else tuple(torch.zeros_like(w) for w in fast)
        per_batch = self.test_batch // C
        timeline: list[Weights] = []
        losses: list[torch.Tensor] = []
        j = 0
        while j < n:
            end = min(n, j + per_batch - (first + j) % per_batch)  # this test-time batch's last chunk + 1
            at = tuple(a[:, :, None] for a in anchor)
            grads = inner_grads(at, keys[:, :, j:end], values[:, :, j:end], theta[:, :, j:end])
            if self.stats is not None:  # the unweighted inner loss at the weights the gradient is taken at
                losses.append((mlp(at, keys[:, :, j:end]) - values[:, :, j:end]).pow(2).mean(-1).detach())
            grads = tuple(soft_clamp(g) for g in grads)
            for i in range(j, end):
                e, a = eta[:, :, i], alpha[:, :, i]
                momentum = tuple(e * s - g[:, :, i - j] for s, g in zip(momentum, grads))
                if self.decay_target == "slow_weights":
                    fast = tuple((1 - a) * w + a * w0 + s for w, w0, s in zip(fast, slow, momentum))
                else:
                    fast = tuple((1 - a) * w + s for w, s in zip(fast, momentum))
                timeline.append(fast)
            if (first + end) % per_batch == 0:
                anchor = fast
            j = end
        state.fast, state.momentum, state.anchor = fast, momentum, anchor
        if self.stats is not None:
            self.stats.update(inner_loss=torch.cat(losses, dim=2).mean(), theta=theta.detach().mean(),
                              eta=eta.detach().mean(), alpha=alpha.detach().mean())
        return timeline
