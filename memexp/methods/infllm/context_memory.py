"""One attention layer's InfLLM context memory and its attention step (thunlp/InfLLM @ 12b7079,
inf_llm/attention/context_manager.py `ContextManager`, torch path; memexp's own code).

Tensors are [B, heads, T, head_dim] as in the official code. Keys are kept unrotated; InfLLM
applies its own RoPE when it attends:
- local: the chunk's queries and the last `n_local` keys before them (plus the chunk) rotated
  at their distances inside that window (query i sees keys at distance 0 .. n_local - 1);
- global: the initial tokens, the retrieved blocks and the part of the history that left the
  window but is not yet a block (the "remainder"), all unrotated, read by queries rotated at the
  one angle of position n_local - 1: every far token sits just beyond the window.
Both parts share one softmax. The attention mass each key receives from local queries while it
is in the window accumulates into its score; a block's representative keys are, per query head,
the `repr_topk` keys of highest score, averaged; a query chunk retrieves the `topk` blocks whose
representative keys (all heads flattened) have the highest inner product with its mean global
query (all blocks while there are at most `topk`).

Memory placement: finished blocks are copied to the host when the compute device is a GPU (the
official MemoryUnit's cpu_data); up to `max_cached_block` of them per layer are kept on the
device, least recently retrieved evicted first (the official "lru" cache). Blocks are never
written after they are made, so clones share them; everything that changes is copied.

Logits, softmax, scores and outputs are in the compute dtype, as in the official torch path. One
deliberate difference: the global keys are concatenated in block order (the official buffer reuses
slots, an order the softmax does not see; in bf16 the sums may round differently).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import torch

from memexp.backbones.rotary import Rope, apply_rotary


@dataclass(frozen=True)
class Settings:
    """The method's sizes and InfLLM's RoPE tables on the compute device."""

    n_init: int
    n_local: int
    block_size: int
    topk: int
    repr_topk: int
    exc_block_size: int
    max_cached_block: int
    cos: torch.Tensor  # [n_local + exc_block_size + 1, rotary_dim] fp32: positions 0 .. the window's end
    sin: torch.Tensor

    @classmethod
    def make(cls, cfg, rotary_dim: int, base: float, device: torch.device) -> "Settings":
        """The first `rotary_dim` channels of each head rotate (the whole head on Llama, a quarter on
        Qwen3.5), at the frequencies of RoPE over those channels, as the backbone's own RoPE."""
        inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim))
        positions = torch.arange(cfg.n_local + cfg.exc_block_size + 1, dtype=torch.float32) * cfg.distance_scale
        cos, sin = Rope(inv_freq).cos_sin(positions, torch.float32)
        return cls(cfg.n_init, cfg.n_local, cfg.block_size, cfg.topk, cfg.repr_topk, cfg.exc_block_size,
                   cfg.max_cached_block, cos.to(device), sin.to(device))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on the first rotary_dim channels of [B, H, T, D], with fp32 tables [T, rotary_dim] (or
    [1, rotary_dim]: one angle for every position),
    computed in fp32 and returned in x's dtype, as the official RotaryEmbeddingESM does."""
    cos = cos.expand(x.shape[2], -1)
    sin = sin.expand(x.shape[2], -1)
    return apply_rotary(x.transpose(1, 2).float(), cos, sin).transpose(1, 2).to(x.dtype)


def expand_heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    """KV heads [B, Hkv, ...] -> query heads [B, H, ...] (query head h reads KV head h // (H / Hkv))."""
    return t if t.shape[1] == heads else t.repeat_interleave(heads // t.shape[1], dim=1)


def _empty(batch: int, heads: int, dim: int, dtype, device) -> torch.Tensor:
    return torch.empty(batch, heads, 0, dim, dtype=dtype, device=device)


@dataclass(eq=False)
class Block:
    """block_size tokens of one layer's history: keys and values [B, Hkv, block_size, D] where they
    are stored (the host when computing on a GPU). Never written after it is made."""

    k: torch.Tensor
    v: torch.Tensor

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()


class ContextMemory:
    """A layer's InfLLM state (memexp.backbones.stack.LayerState): window, initial tokens,
    remainder with its scores, blocks with their representative keys, and the device cache."""

    def __init__(self, settings: Settings, batch: int, heads: int, kv_heads: int, head_dim: int, dtype,
                 device: torch.device) -> None:
        self.s, self.heads, self.device, self.dtype = settings, heads, device, dtype
        self.host = torch.device("cpu")
        self.local_k = _empty(batch, kv_heads, head_dim, dtype, device)
        self.local_v = _empty(batch, kv_heads, head_dim, dtype, device)
        self.remainder_k = _empty(batch, kv_heads, head_dim, dtype, device)
        self.remainder_v = _empty(batch, kv_heads, head_dim, dtype, device)
        self.remainder_score = torch.zeros(batch, heads, 0, dtype=dtype, device=device)
        self.init_k = _empty(batch, kv_heads, head_dim, dtype, device)
        self.init_v = _empty(batch, kv_heads, head_dim, dtype, device)
        self.init_done = False
        self.blocks: list[Block] = []
        # representative keys [B, capacity, H * D], the first len(blocks) rows written; grown by
        # doubling (a million tokens make thousands of blocks per layer, too many to re-concatenate)
        self._repr = torch.zeros(batch, 16, heads * head_dim, dtype=dtype, device=device)
        self.cache: OrderedDict[int, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()  # LRU first
        self.loads = 0  # blocks copied host -> device
        self.length = 0  # tokens read
        self.retrieved: list[list[int]] = []  # the blocks of each query chunk, when `record_retrieval` is on
        self.record_retrieval = False

    @property
    def block_repr(self) -> torch.Tensor:
        """The blocks' representative keys [B, blocks, H * D]."""
        return self._repr[:, : len(self.blocks)]

    # --- LayerState -----------------------------------------------------------------------------
    def clone(self) -> "ContextMemory":
        new = ContextMemory.__new__(ContextMemory)
        new.__dict__.update(self.__dict__)
        for name in ("local_k", "local_v", "remainder_k", "remainder_v", "remainder_score", "init_k", "init_v"):
            setattr(new, name, getattr(self, name).clone())
        new.blocks = list(self.blocks)  # a block is never written after it is made
        new._repr = self.block_repr.clone()  # rows are written past the end on the next block
        new.cache = OrderedDict(self.cache)
        new.retrieved = [list(r) for r in self.retrieved]
        return new

    def nbytes(self) -> int:
        live = (self.local_k, self.local_v, self.remainder_k, self.remainder_v, self.remainder_score, self.init_k,
                self.init_v, self.block_repr)
        return sum(t.numel() * t.element_size() for t in live) + self.host_bytes() + self.cache_bytes()

    def scale_recurrent(self, lam: float) -> None:
        """InfLLM keeps KV, not a recurrent memory: nothing to rescale."""

    def host_bytes(self) -> int:
        """Bytes of the blocks' KV where blocks are stored (the host on a GPU machine)."""
        return sum(b.nbytes() for b in self.blocks)

    def cache_bytes(self) -> int:
        """Bytes of the device copies of cached blocks (none when blocks already live on the device)."""
        return sum(2 * k.numel() * k.element_size() for k, _ in self.cache.values() if self._offloaded)

    @property
    def _offloaded(self) -> bool:
        return self.device.type != "cpu"

    # --- the attention step -----------------------------------------------------------------------
    def append(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Attend the chunk's queries q [B, H, L, D] (its keys and values k, v [B, Hkv, L, D] unrotated
        are added first) query chunk by query chunk; returns [B, H, L, D] in q's dtype."""
        s, length = self.s, q.shape[2]
        self.local_k = torch.cat([self.local_k, k], dim=2)
        self.local_v = torch.cat([self.local_v, v], dim=2)
        kv_length = self.local_k.shape[2]
        self._st, self._ed = 0, self.remainder_k.shape[2]
        self.remainder_k = torch.cat([self.remainder_k, k], dim=2)
        self.remainder_v = torch.cat([self.remainder_v, v], dim=2)
        self.remainder_score = torch.cat([self.remainder_score, self.remainder_score.new_zeros(
            *self.remainder_score.shape[:2], length)], dim=2)
        global_q = rotate(q, s.cos[s.n_local - 1 : s.n_local], s.sin[s.n_local - 1 : s.n_local])
        out = []
        for st in range(0, length, s.exc_block_size):
            ed = min(st + s.exc_block_size, length)
            kv_st = max(kv_length + st - length - s.n_local, 0)
            kv_ed = kv_length + ed - length
            o, local_score = self._attend(q[:, :, st:ed], self.local_k[:, :, kv_st:kv_ed],
                                          self.local_v[:, :, kv_st:kv_ed], global_q[:, :, st:ed])
            out.append(o)
            self._archive(ed - st, local_score)
        self.length += length
        if self.local_k.shape[2] >= s.n_local:
            self.local_k = self.local_k[:, :, -s.n_local:].clone()
            self.local_v = self.local_v[:, :, -s.n_local:].clone()
        self.remainder_k = self.remainder_k[:, :, self._st:].clone()
        self.remainder_v = self.remainder_v[:, :, self._st:].clone()
        self.remainder_score = self.remainder_score[:, :, self._st:].clone()
        return torch.cat(out, dim=2)

    def _attend(self, q, local_k, local_v, global_q) -> tuple[torch.Tensor, torch.Tensor]:
        """One query chunk: local window and retrieved memory under one softmax. Returns the
        output [B, H, Lq, D] and each local key's attention mass summed over the chunk [B, H, Lk]."""
        s, heads = self.s, self.heads
        lq, lk = q.shape[2], local_k.shape[2]
        scale = 1 / math.sqrt(q.shape[-1])
        local_q = rotate(q, s.cos[lk - lq : lk], s.sin[lk - lq : lk])
        local_kr = rotate(local_k, s.cos[:lk], s.sin[:lk])
        dist = torch.arange(lq, device=q.device)[:, None] - torch.arange(lk, device=q.device)[None, :] + (lk - lq)
        local_mask = (dist < s.n_local) & (dist >= 0)
        local_logits = torch.matmul(local_q, expand_heads(local_kr, heads).transpose(-1, -2))
        local_logits = local_logits.masked_fill(~local_mask, float("-inf")) * scale

        selected = self._retrieve(global_q)
        global_k, global_v, offset = self._global_kv(selected, lq)
        gk = global_k.shape[2]
        dist = torch.arange(lq, device=q.device)[:, None] - torch.arange(gk, device=q.device)[None, :] + offset
        global_mask = dist >= s.n_local
        global_logits = torch.matmul(global_q, expand_heads(global_k, heads).transpose(-1, -2))
        global_logits = global_logits.masked_fill(~global_mask, float("-inf")) * scale

        p = torch.softmax(torch.cat([local_logits, global_logits], dim=-1), dim=-1)
        p_local = p[..., :lk].masked_fill(~local_mask, 0)
        p_global = p[..., lk:].masked_fill(~global_mask, 0)
        o = torch.matmul(p_local, expand_heads(local_v, heads))
        o = o + torch.matmul(p_global, expand_heads(global_v, heads))
        return o, p_local.sum(dim=-2)

    def _retrieve(self, global_q: torch.Tensor) -> list[int]:
        """The chunk's blocks (ascending): all while there are at most topk, else the topk whose
        representative keys score highest against the chunk's mean global query. Batch 1."""
        s, n = self.s, len(self.blocks)
        if n <= s.topk:
            selected = list(range(n))
        else:
            query = global_q.mean(dim=2).reshape(global_q.shape[0], -1)  # [B, H * D]
            logits = torch.matmul(self.block_repr[0], query[0][:, None]).squeeze(-1)
            selected = sorted(logits.topk(s.topk).indices.tolist())
        if self.record_retrieval:
            self.retrieved.append(selected)
        return selected

    def _global_kv(self, selected: list[int], lq: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Keys and values of the global part [B, Hkv, G, D]: the retrieved blocks, the initial
        tokens, then the remainder beyond the window; and the official mask offset."""
        s = self.s
        blocks = [self._on_device(i) for i in selected]
        remainder_len = max(self._ed - self._st + lq - s.n_local, 0)
        part = slice(self._st, self._st + remainder_len)
        keys = [k for k, _ in blocks] + [self.init_k, self.remainder_k[:, :, part]]
        values = [v for _, v in blocks] + [self.init_v, self.remainder_v[:, :, part]]
        # the official mask's offset: the whole remainder's length (this call's tokens included)
        # plus the global buffer's position of the remainder
        offset = self.remainder_k.shape[2] + len(selected) * s.block_size + self.init_k.shape[2]
        return torch.cat(keys, dim=2), torch.cat(values, dim=2), offset

    def _on_device(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Block `index`'s KV on the compute device, through the LRU cache of max_cached_block blocks."""
        if index in self.cache:
            self.cache.move_to_end(index)
            return self.cache[index]
        block = self.blocks[index]
        if self._offloaded:
            kv = (block.k.to(self.device, non_blocking=True), block.v.to(self.device, non_blocking=True))
            self.loads += 1
        else:
            kv = (block.k, block.v)
        self.cache[index] = kv
        while len(self.cache) > self.s.max_cached_block:
            self.cache.popitem(last=False)
        return kv

    def _archive(self, exc_length: int, local_score: torch.Tensor) -> None:
        """After a query chunk: add its local attention mass to the remainder's scores, then move
        what left the window into the initial tokens (until n_init) and into blocks."""
        s = self.s
        ed = self._ed + exc_length
        st = self._st
        span = ed - st
        local_score = local_score[:, :, -(exc_length + s.n_local):]
        self.remainder_score[:, :, ed - local_score.shape[2] : ed] += local_score
        if not self.init_done and span > s.n_local:
            take = min(s.n_init - self.init_k.shape[2], span - s.n_local)
            self.init_k = torch.cat([self.init_k, self.remainder_k[:, :, st : st + take]], dim=2)
            self.init_v = torch.cat([self.init_v, self.remainder_v[:, :, st : st + take]], dim=2)
            st, span = st + take, span - take
            self.init_done = self.init_k.shape[2] == s.n_init
        while span - s.block_size >= s.n_local:
            span -= s.block_size
            k = self.remainder_k[:, :, st : st + s.block_size]
            v = self.remainder_v[:, :, st : st + s.block_size]
            self.blocks.append(Block(k.to(self.host, copy=True), v.to(self.host, copy=True)))
            rep = self._representative(k, self.remainder_score[:, :, st : st + s.block_size])
            self._add_representative(rep)
            st += s.block_size
        self._ed, self._st = ed, st

    def _add_representative(self, rep: torch.Tensor) -> None:
        """Write the newest block's representative key [B, H * D] (its block is already in `blocks`)."""
        row = len(self.blocks) - 1
        if row >= self._repr.shape[1]:
            grown = self._repr.new_zeros(self._repr.shape[0], max(16, 2 * self._repr.shape[1]), self._repr.shape[2])
            grown[:, :row] = self._repr[:, :row]
            self._repr = grown
        self._repr[:, row] = rep

    def _representative(self, k: torch.Tensor, score: torch.Tensor) -> torch.Tensor:
        """A block's representative key [B, H * D]: per query head, the mean of its keys at the
        repr_topk highest scores."""
        keys = expand_heads(k, self.heads)  # [B, H, block, D]
        top = score.topk(self.s.repr_topk, dim=-1).indices  # [B, H, r]
        picked = torch.gather(keys, 2, top[..., None].expand(*top.shape, keys.shape[-1]))
        return picked.mean(dim=2).reshape(k.shape[0], -1)
