"""The key/value caches an attention layer carries between forward calls: `KVCache`, which grows
with the context, and `StaticKVCache`, of fixed shape for CUDA-graph decoding. Both hand their
keys and values (and, for the static one, the mask of written rows) to
`memexp.kernels.attention.attention`."""

from __future__ import annotations

import torch


class KVCache:
    """One layer's keys and values [B, T, Hkv, D] in a buffer of `capacity` rows, of which the
    first `length` are written. With a window, only the last `window - 1` tokens are kept between
    forward calls: that is all the next query can see.

    Growth is bounded so that long contexts do not hold much more than their own KV: a full
    buffer grows by its own size while small (amortised doubling) and by at most `MAX_STEP` rows
    once large, always to a multiple of `BLOCK` rows. A clone copies the written rows into a buffer
    with `BLOCK` to `2 * BLOCK - 1` free rows, so the replay, question and a short answer of an
    answer branch append without growing it; a long answer grows it by `MAX_STEP`, not by the
    context's size (doubling there made each branch briefly hold about three times the context's KV
    together with the retained state's buffer).
    """

    BLOCK = 1024  # rows: capacities are multiples of this
    MAX_STEP = 65536  # rows: the most a full buffer grows by at once

    def __init__(self, k: torch.Tensor, v: torch.Tensor, length: int, window: int | None = None) -> None:
        self.k, self.v, self.length, self.window = k, v, length, window

    @classmethod
    def empty(cls, batch: int, kv_heads: int, head_dim: int, dtype, device, window: int | None = None) -> "KVCache":
        z = torch.empty(batch, 0, kv_heads, head_dim, dtype=dtype, device=device)
        return cls(z, z.clone(), 0, window)

    @property
    def capacity(self) -> int:
        """Rows the buffer holds, written or not."""
        return self.k.shape[1]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add [B, T, Hkv, D] keys/values; return views of every cached key and value."""
        need = self.length + k.shape[1]
        if need > self.capacity:
            step = min(max(self.capacity, self.BLOCK), self.MAX_STEP)
            cap = _round_up(max(need, self.capacity + step), self.BLOCK)
            self.k, self.v = (self._grown(t, cap) for t in (self.k, self.v))
        self.k[:, self.length : need] = k
        self.v[:, self.length : need] = v
        self.length = need
        return self.k[:, :need], self.v[:, :need]

    def trim(self) -> None:
        """Drop what no later query can attend (sliding window only)."""
        keep = None if self.window is None else self.window - 1
        if keep is None or self.length <= keep:
            return
        start = self.length - keep
        if self.k.requires_grad:
            # Training: autograd saved views of this buffer for the backward pass, so the kept
            # tail becomes the new buffer instead of being written over the old one.
            self.k, self.v = self.k[:, start : self.length], self.v[:, start : self.length]
            self.length = keep
            return
        self.k[:, :keep] = self.k[:, start : self.length].clone()
        self.v[:, :keep] = self.v[:, start : self.length].clone()
        self.length = keep

    def _grown(self, t: torch.Tensor, cap: int) -> torch.Tensor:
        out = t.new_empty(t.shape[0], cap, *t.shape[2:])
        out[:, : self.length] = t[:, : self.length]
        return out

    def clone(self) -> "KVCache":
        """A copy of the written rows in a buffer of their length rounded up, plus one `BLOCK`."""
        cap = _round_up(self.length + self.BLOCK, self.BLOCK)
        return KVCache(self._grown(self.k, cap), self._grown(self.v, cap), self.length, self.window)

    def scale_recurrent(self, lam: float) -> None:
        """Keys and values are not recurrent memory: a layer state's rescale keeps them."""

    def attention_mask(self) -> None:
        """The cache's rows are exactly the keys so far: `attention` aligns the queries itself."""
        return None

    def nbytes(self) -> int:
        b, _, h, d = self.k.shape
        return 2 * b * self.length * h * d * self.k.element_size()


class StaticKVCache:
    """A KV cache of fixed shape for decoding one token per call with no host synchronisation,
    so that a decode step can be captured in a CUDA graph and replayed (memexp.backbones.static_decode).

    The buffers [B, capacity, Hkv, D] never change shape or address; `row` is a device tensor [1]
    naming the row the next token writes, and the query attends the rows at or before it through a
    mask. With row = the absolute position (shared by a decoder's layers, advanced by it) this is full
    attention; with row = position mod W over W rows, attention within aligned segments of W tokens
    (Titan's segmented layers): the rows after `row` hold the previous segment and are masked.
    """

    window = None

    def __init__(self, k: torch.Tensor, v: torch.Tensor, row: torch.Tensor) -> None:
        self.k, self.v, self.row = k, v, row
        self._rows = torch.arange(k.shape[1], device=k.device)

    @classmethod
    def from_cache(cls, cache: KVCache, capacity: int, row: torch.Tensor) -> "StaticKVCache":
        """A copy of `cache`'s rows (0 .. length - 1) in buffers of `capacity` rows."""
        if cache.window is not None:
            raise ValueError(f"static decoding needs full-attention caches; this one has window={cache.window}")
        if capacity < cache.length:
            raise ValueError(f"capacity {capacity} < the {cache.length} rows already cached")
        k, v = (t.new_zeros(t.shape[0], capacity, *t.shape[2:]) for t in (cache.k, cache.v))
        k[:, : cache.length] = cache.k[:, : cache.length]
        v[:, : cache.length] = cache.v[:, : cache.length]
        return cls(k, v, row)

    @property
    def capacity(self) -> int:
        return self.k.shape[1]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write one token's [B, 1, Hkv, D] key and value at `row`; return the whole buffers."""
        if k.shape[1] != 1:
            raise ValueError(f"a static KV cache takes one token per call, got {k.shape[1]}")
        self.k.index_copy_(1, self.row, k)
        self.v.index_copy_(1, self.row, v)
        return self.k, self.v

    def attention_mask(self) -> torch.Tensor:
        """[1, capacity] bool: the rows at or before `row`."""
        return (self._rows <= self.row)[None, :]

    def trim(self) -> None:
        """Nothing to drop: the rows are fixed."""

    def scale_recurrent(self, lam: float) -> None:
        """Keys and values are not recurrent memory."""

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor a decode step writes (a capture's warm-up restores them)."""
        return [self.k, self.v]

    def after_step(self) -> None:
        """Nothing to do between steps."""


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
