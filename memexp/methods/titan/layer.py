"""The Titan attention layer: a Llama decoder block whose attention sees only its own segment,
plus the neural memory's read blended in by a learned gate, put in place with `replace_layer`.

Per block (h = input_layernorm(x); q, k rotated at absolute positions; W the segment length):

    v_att   = lerp(v, v_prev, sigmoid(Linear_mix(h)))     layers after the first Titan layer (value residual)
    O_local = softmax attention of q at p over keys in [W floor(p/W), p], values v_att
    lambda  = sigmoid(W_lambda h + b_lambda)               per query head and channel, 0 while p < W
    O       = (1 - lambda) O_local + lambda M(q)           M: the memory (memory.py), written with the raw v
    x      += o_proj(O);  x += mlp(post_attention_layernorm(x))

The block's own modules (norms, q/k/v/o projections, MLP) are the replaced layer's, under the same
names, so the backbone's tensor names do not change; the trainable parts live in a `TitanBlock`
(`titan.*`) that retrofit.py collects into TitanModules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from memexp.backbones.kv_cache import KVCache, StaticKVCache
from memexp.backbones.rotary import apply_rotary
from memexp.backbones.stack import Layer, LayerContext, StateSpec
from memexp.kernels.attention import attention
from memexp.methods.titan.memory import MemoryState, NeuralMemory

GATE_INIT = 0.05  # sigmoid(b_lambda) at init: the memory's share of the output
VALUE_MIX_BIAS = -10.0  # sigmoid(-10) ~ 4.5e-5: the value residual starts (almost) closed, as in the code


class TitanBlock(nn.Module):
    """A Titan layer's trainable modules: the memory, the gate, the value-residual mixer (each None
    when the layer has none)."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, memory: NeuralMemory | None,
                 value_mix: bool) -> None:
        super().__init__()
        self.memory = memory
        self.gate = None
        if memory is not None:
            self.gate = nn.Linear(hidden, heads * head_dim)
            nn.init.zeros_(self.gate.weight)
            nn.init.constant_(self.gate.bias, logit(GATE_INIT))
        self.stats: dict[str, torch.Tensor] | None = None  # see NeuralMemory.stats (here: the gate's mean)
        self.value_mix = None
        if value_mix:
            self.value_mix = nn.Linear(hidden, kv_heads)
            nn.init.zeros_(self.value_mix.weight)
            nn.init.constant_(self.value_mix.bias, VALUE_MIX_BIAS)


    @property
    def dtype(self) -> torch.dtype:
        """The parameters' dtype (method.memory_dtype): gate, mixer and blend compute in it."""
        first = next(self.parameters(), None)
        return torch.float32 if first is None else first.dtype


def logit(p: float) -> float:
    return math.log(p / (1 - p))


class ValueCarry:
    """The previous Titan layer's raw values [B, T, Hkv, d] for the tokens of the chunk being run:
    written by a layer whose successor mixes toward them, read by that successor (layers run in order
    within a chunk, so nothing crosses chunks and nothing is state)."""

    values: torch.Tensor | None = None


@dataclass
class TitanState:
    """A Titan layer's state: `kv` the current segment's keys (rotated) and mixed values, in the compute
    dtype; `memory` the memory's state in its dtype (None in a layer without memory); `position` the tokens
    read so far (a host int, so that segment and chunk arithmetic never waits on the device)."""

    kv: KVCache
    memory: MemoryState | None = None
    position: int = 0

    def clone(self) -> "TitanState":
        return TitanState(self.kv.clone(), None if self.memory is None else self.memory.clone(), self.position)

    def nbytes(self) -> int:
        return self.kv.nbytes() + (0 if self.memory is None else self.memory.nbytes())

    def scale_recurrent(self, lam: float) -> None:
        """The memory's episodic part times lam (MemoryState.scale_recurrent); the segment's KV is kept."""
        if self.memory is not None:
            self.memory.scale_recurrent(lam)


@dataclass
class StaticTitanState:
    """A TitanState in fixed tensors for static decoding (memexp.backbones.static_decode): the
    segment's keys and values in a ring of W rows (`row` = position mod W: the rows after it hold the
    previous segment and are masked), the memory's pending chunk in fixed slots (the same index: a
    memory chunk is a segment) and its weights in fixed tensors; `position` counts the tokens read on
    the host, so that the test-time update at a chunk's end runs between two steps, not inside one."""

    kv: StaticKVCache
    memory: MemoryState | None
    module: NeuralMemory | None
    row: torch.Tensor
    position: int

    def tensors(self) -> list[torch.Tensor]:
        out = self.kv.tensors() + [self.row]
        if self.memory is not None:
            m = self.memory
            out += [m.buffer_k, m.buffer_v, *m.fast, *m.momentum, *m.anchor]
        return out

    def after_step(self) -> None:
        self.position += 1
        if self.memory is not None and self.position % self.module.chunk == 0:
            self.module.absorb_static(self.memory, self.position // self.module.chunk - 1)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())

    def scale_recurrent(self, lam: float) -> None:
        raise NotImplementedError("a static decoding state is not rescaled; rescale the TitanState before")


class TitanLayer(Layer):
    """A Llama `DecoderLayer` made segmented, with its `TitanBlock`. `carry` links it to its Titan
    neighbours: it reads the previous layer's values when its block has a mixer and writes its own
    when `passes_values` (the next Titan layer mixes)."""

    def __init__(self, base: nn.Module, block: TitanBlock, segment: int, rope_memory: bool,
                 carry: ValueCarry, passes_values: bool) -> None:
        super().__init__()
        self.input_layernorm = base.input_layernorm
        self.self_attn = base.self_attn
        self.post_attention_layernorm = base.post_attention_layernorm
        self.mlp = base.mlp
        self.titan = block
        self.segment, self.rope_memory = segment, rope_memory
        self.carry, self.passes_values = carry, passes_values

    def init_state(self, spec: StateSpec) -> TitanState:
        c = self.self_attn.c
        kv = KVCache.empty(spec.batch, c.kv_heads, c.dim_per_head, spec.dtype, spec.device)
        memory = self.titan.memory
        return TitanState(kv, None if memory is None else memory.init_state(spec.batch, spec.device))

    def static_state(self, state: TitanState, position: torch.Tensor) -> StaticTitanState:
        if state.position % self.segment != state.kv.length:
            raise ValueError(f"Titan layer: {state.kv.length} cached keys at position {state.position} "
                             f"(segment {self.segment})")
        row = torch.remainder(position, self.segment)
        memory = self.titan.memory
        return StaticTitanState(StaticKVCache.from_cache(state.kv, self.segment, row),
                                None if memory is None else memory.static_state(state.memory), memory, row,
                                state.position)

    def forward(self, x: torch.Tensor, state: TitanState | StaticTitanState,
                ctx: LayerContext) -> tuple[torch.Tensor, TitanState | StaticTitanState]:
        """x [B, T, D] at absolute positions ctx.positions (contiguous, continuing `state`)."""
        attn, block = self.self_attn, self.titan
        c = attn.c
        B, T, hd = x.shape[0], x.shape[1], c.dim_per_head
        h = self.input_layernorm(x)
        q_raw = attn.q_proj(h).view(B, T, c.num_attention_heads, hd)
        k_raw = attn.k_proj(h).view(B, T, c.kv_heads, hd)
        v = attn.v_proj(h).view(B, T, c.kv_heads, hd)
        q, k = apply_rotary(q_raw, *ctx.rotary), apply_rotary(k_raw, *ctx.rotary)
        v_att = v
        dt = block.dtype  # the modules' dtype (method.memory_dtype): gate, mixer and blend run in it
        if block.value_mix is not None:
            mix = torch.sigmoid(block.value_mix(h.to(dt)))[..., None]  # [B, T, Hkv, 1]
            v_att = torch.lerp(v.to(dt), self.carry.values.to(dt), mix).to(v.dtype)
        self.carry.values = v if self.passes_values else None
        q_mem, k_mem = (q, k) if self.rope_memory else (q_raw, k_raw)
        if isinstance(state, StaticTitanState):  # one decode token in fixed tensors (static_state)
            state.row.copy_(torch.remainder(ctx.positions, self.segment))
            keys, values = state.kv.append(k, v_att)
            o = attention(q, keys, values, mask=state.kv.attention_mask())
            read = None if block.memory is None else block.memory.static_step(q_mem, k_mem, v, state.memory,
                                                                               state.row)
        else:
            start = state.position
            o = segmented_attention(q, k, v_att, state, start, self.segment)
            read = None if block.memory is None else block.memory(q_mem, k_mem, v, state.memory, start)
            state.position += T
        if read is not None:
            lam = torch.sigmoid(block.gate(h.to(dt))).view(B, T, c.num_attention_heads, hd)
            lam = lam * (ctx.positions >= self.segment).to(lam.dtype)[None, :, None, None]
            if block.stats is not None:
                block.stats["lambda"] = lam.detach().mean()
            o = torch.lerp(o.to(dt), read, lam).to(o.dtype)
        x = x + attn.o_proj(o.reshape(B, T, -1))
        return x + self.mlp(self.post_attention_layernorm(x)), state


def segmented_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state: TitanState, start: int,
                        segment: int) -> torch.Tensor:
    """Causal attention within absolute segments of `segment` tokens.

    q [B, T, H, d], k, v [B, T, Hkv, d] of positions start .. start + T - 1; state.kv holds the keys and
    values of the current segment before `start` and afterwards those of the segment the call ends in.
    The tokens finishing the current segment attend over the cache; whole later segments are folded
    into the batch ([B n, W, ...], plain causal attention, the last one padded at its end: padded keys
    come after every real query, padded queries are dropped). Returns [B, T, H, d].
    """
    B, T = q.shape[:2]
    head = min(T, segment - start % segment)
    keys, values = state.kv.append(k[:, :head], v[:, :head])
    out = attention(q[:, :head], keys, values)
    rest = T - head
    if rest:
        n = -(-rest // segment)
        pad = n * segment - rest

        def fold(t: torch.Tensor) -> torch.Tensor:
            return F.pad(t[:, head:], (0, 0, 0, 0, 0, pad)).reshape(B * n, segment, *t.shape[2:])

        folded = attention(fold(q), fold(k), fold(v)).reshape(B, n * segment, *q.shape[2:])
        out = torch.cat([out, folded[:, :rest]], dim=1)
    end = (start + T) % segment  # tokens of the segment the call ends in
    if rest or end == 0:
        state.kv = KVCache.empty(B, k.shape[2], k.shape[3], k.dtype, k.device)
        if end:
            state.kv.append(k[:, T - end:], v[:, T - end:])
    return out
