"""The layer seam every architecture runs on: layers with one call shape, per-layer states,
and the chunked forward / training forward that loop over them.

A backbone is embed -> layers -> final norm -> LM head. Each layer is a `Layer`:

    hidden [B, T, D], state = layer(hidden [B, T, D], state: LayerState, ctx: LayerContext)
    state = layer.init_state(StateSpec(batch, device, dtype, window))

and keeps whatever it needs across chunks in its own `LayerState` (a recurrent memory and
conv window, a KV cache, a Titan memory, ...). The backbone's `StackState` is the list of
those plus the position counter, so clone / nbytes / scale_recurrent and exact continuation
hold for any mix of layers, including ones a method installs with `replace_layer`.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, replace
from typing import Callable, ClassVar, Protocol, runtime_checkable

import torch
from torch import nn

from memexp.backbones.base import Backbone, Channel, Observer, State, Tokenizer, as_ids
from memexp.backbones.kv_cache import KVCache
from memexp.backbones.loading import BackboneLoadError
from memexp.backbones.rotary import Rope


@runtime_checkable
class LayerState(Protocol):
    """What one layer keeps between chunks. The backbone's State is a list of these."""

    def clone(self) -> "LayerState":
        """A deep copy sharing no storage with the original."""

    def nbytes(self) -> int:
        """Bytes held by the state's tensors."""

    def scale_recurrent(self, lam: float) -> None:
        """Multiply the recurrent memory by `lam` in place (nothing, for a layer without one);
        conv windows and KV caches are not memory the methods rescale."""


@dataclass
class RecurrentState:
    """A recurrent layer's state: the fp32 memory (GDN [B, HV, K, V], Mamba-2 [B, H, P, N])
    and the raw short-conv window [B, channels, kernel - 1] in the compute dtype (None for a
    layer without short conv)."""

    recurrent: torch.Tensor
    conv: torch.Tensor | None = None

    def clone(self) -> "RecurrentState":
        return RecurrentState(self.recurrent.clone(), None if self.conv is None else self.conv.clone())

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.recurrent, self.conv) if t is not None)

    def scale_recurrent(self, lam: float) -> None:
        self.recurrent.mul_(lam)


@dataclass(frozen=True)
class StateSpec:
    """What a layer needs to make its state before any token."""

    batch: int
    device: torch.device
    dtype: torch.dtype  # compute dtype (conv windows, KV caches); recurrent memories are fp32
    window: int | None = None  # the backbone's attention window (None: full attention)


@dataclass(frozen=True)
class LayerContext:
    """What a layer may read besides its input and state, for one chunk of tokens."""

    positions: torch.Tensor  # [T] absolute positions of the chunk's tokens (continuing the state's counter)
    start: int  # offset of the chunk's first token inside the current forward call
    rotary: tuple[torch.Tensor, torch.Tensor] | None = None  # backbone's RoPE (cos, sin) [T, rotary_dim], compute dtype
    observer: Observer | None = None
    layer: int = 0  # index of the layer being called (set by the loop)

    def at(self, layer: int) -> "LayerContext":
        return replace(self, layer=layer)

    @property
    def emit(self) -> Callable[[torch.Tensor, torch.Tensor], None] | None:
        """The `emit(keys, queries)` callback of this layer and chunk ([T, H, d_k] each, see
        `Observer`), or None without an observer (the layer then skips the features)."""
        observer, layer, start = self.observer, self.layer, self.start
        if observer is None:
            return None
        return lambda keys, queries: observer(layer, start, keys, queries)


class Layer(nn.Module):
    """One block of a backbone (norms, mixer, MLP) behind the uniform call.

    `forward(hidden [B, T, D], state, ctx) -> (hidden [B, T, D], state)` advances `state` over
    the chunk (it may return the same object, mutated, or a new one) and must be exact under
    continuation: one call over A + B equals a call over A then one over B from its state.
    """

    def forward(self, hidden: torch.Tensor, state: LayerState, ctx: LayerContext) -> tuple[torch.Tensor, LayerState]:
        raise NotImplementedError

    def init_state(self, spec: StateSpec) -> LayerState:
        """The state before any token."""
        raise NotImplementedError

    def channels(self, index: int) -> list[Channel]:
        """The addressable recurrent channels of this layer when it sits at `index` (none by default)."""
        return []

    def static_state(self, state: LayerState, position: torch.Tensor):
        """`state` in fixed tensors for static decoding (memexp.backbones.static_decode), for a layer
        whose state is neither a KV cache nor a recurrent state; None when it has no such form. The
        result offers `tensors()` (what a step writes) and `after_step()` (host work between steps).
        `position` is the decoder's device position [1]."""
        return None


@dataclass
class StackState(State):
    """Per-layer states (in layer order) plus the position counter."""

    layers: list[LayerState]
    position: int = 0

    def clone(self) -> "StackState":
        return type(self)([s.clone() for s in self.layers], self.position)

    def nbytes(self) -> int:
        return sum(s.nbytes() for s in self.layers)

    def scale_recurrent(self, lam: float) -> None:
        for s in self.layers:
            s.scale_recurrent(lam)

    # Read-only views by kind (None for layers of another kind), for inspection and tests.
    @property
    def recurrent(self) -> list[torch.Tensor | None]:
        return [s.recurrent if isinstance(s, RecurrentState) else None for s in self.layers]

    @property
    def conv(self) -> list[torch.Tensor | None]:
        return [s.conv if isinstance(s, RecurrentState) else None for s in self.layers]

    @property
    def kv(self) -> list[KVCache | None]:
        return [s if isinstance(s, KVCache) else None for s in self.layers]


class LayerStackBackbone(Backbone):
    """A causal LM with `model.lm_head` and `model.config`, run one bounded chunk at a time.

    Subclasses name their layer list (`layers`) and supply `_embed` and `_final_norm`, and set
    `rope` when their layers read rotary positions; the chunk loop, the position counter, the
    LM head and the training forward are here, so every architecture runs the same code path.
    """

    state_class: ClassVar[type[StackState]] = StackState
    rope: Rope | None = None

    def __init__(self, model: nn.Module, tokenizer: Tokenizer, name: str, prefill_chunk: int,
                 window: int | None = None) -> None:
        self.model = model.eval()
        self.config = model.config
        self.tokenizer = tokenizer
        self.name = name
        self.prefill_chunk = prefill_chunk
        self.window = window
        self.device = model.lm_head.weight.device
        self.dtype = model.lm_head.weight.dtype
        self.chat_template: str | None = None  # the checkpoint's Jinja chat template, when it ships one
        self.channels = self._channels()

    @property
    @abstractmethod
    def layers(self) -> nn.ModuleList:
        """The model's layer list (its attribute path is the checkpoint's)."""

    def replace_layer(self, index: int, layer: Layer) -> None:
        """Install `layer` (already on the backbone's device and dtype) at `index`; states made
        by `init_state` afterwards hold its state. Its parameters take the replaced layer's
        place in the model (`model.<layers path>.<index>.*`)."""
        if not isinstance(layer, Layer):
            raise TypeError(f"replace_layer: expected a memexp.backbones.stack.Layer, got {type(layer).__name__}")
        self.layers[index] = layer
        self.channels = self._channels()

    def _channels(self) -> list[Channel]:
        return [ch for i, layer in enumerate(self.layers) for ch in layer.channels(i)]

    def state_spec(self, batch: int = 1) -> StateSpec:
        return StateSpec(batch, self.device, self.dtype, self.window)

    def init_state(self) -> StackState:
        return self.state_class([layer.init_state(self.state_spec()) for layer in self.layers])

    def chat_prompt(self, user: str, system: str | None = None, enable_thinking: bool = False) -> str:
        """The checkpoint's chat template applied to one user turn, ending with the assistant
        header (thinking disabled by default, as the papers' LongBench v2 setup)."""
        if self.chat_template is None:
            raise BackboneLoadError(f"{self.name}: the checkpoint has no chat template (tokenizer_config.json "
                                    f"chat_template or chat_template.jinja)")
        from transformers.utils.chat_template_utils import render_jinja_template

        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
        rendered, _ = render_jinja_template([messages], chat_template=self.chat_template, add_generation_prompt=True,
                                            enable_thinking=enable_thinking)
        return rendered[0]

    @torch.no_grad()
    def forward(self, state: StackState, ids, observer: Observer | None = None) -> torch.Tensor:
        ids = as_ids(ids, self.device)
        if ids.numel() == 0:
            raise ValueError("forward needs at least one token")
        for start in range(0, ids.numel(), self.prefill_chunk):
            chunk = ids[None, start:start + self.prefill_chunk]
            ctx = self._context(state.position + start, chunk.shape[1], start, observer)
            last = self._run_layers(self._embed(chunk), state.layers, ctx)[0, -1]
        state.position += ids.numel()
        return self.model.lm_head(self._final_norm(last)).float()

    def train_forward(self, ids: torch.Tensor, state: StackState | None = None) -> torch.Tensor:
        """ids [B, T] from the zero state -> logits [B, T, vocab] in the compute dtype, through
        the same layer calls as `forward` with autograd left on (the whole T as one chunk).
        With `state` (batch 1, e.g. a context read by `forward`), from that state instead,
        which is advanced as `forward` advances it: a read adapter trains on the readout that
        follows a context (memexp.training.notebank_lora)."""
        return self.model.lm_head(self.train_hidden(ids, state))

    def train_hidden(self, ids: torch.Tensor, state: StackState | None = None) -> torch.Tensor:
        """`train_forward` before the LM head: the final-normed hidden states [B, T, hidden]
        (a recipe with a large vocabulary applies the head at the positions it scores only)."""
        ids = torch.as_tensor(ids, device=self.device)
        if ids.dim() != 2 or ids.dtype != torch.long or ids.shape[1] == 0:
            raise ValueError(f"train_forward expects int64 ids [B, T] with T >= 1, got {ids.dtype} {list(ids.shape)}")
        B, T = ids.shape
        if state is not None and B != 1:
            raise ValueError(f"train_forward from a state reads one sequence (B = 1), got B = {B}")
        states = [layer.init_state(self.state_spec(B)) for layer in self.layers] if state is None else state.layers
        first = 0 if state is None else state.position
        hidden = self._run_layers(self._embed(ids), states, self._context(first, T, 0, None))
        if state is not None:
            state.position += T
        return self._final_norm(hidden)

    def _context(self, first: int, length: int, start: int, observer: Observer | None) -> LayerContext:
        positions = torch.arange(first, first + length, device=self.device)
        rotary = None if self.rope is None else self.rope.cos_sin(positions, self.dtype)
        return LayerContext(positions, start, rotary, observer)

    def _run_layers(self, hidden: torch.Tensor, states: list[LayerState], ctx: LayerContext) -> torch.Tensor:
        """Advance every layer over one chunk; `states` is updated in place, entry by entry."""
        for i, layer in enumerate(self.layers):
            hidden, states[i] = layer(hidden, states[i], ctx.at(i))
        return hidden

    @torch.no_grad()
    def input_embeddings(self, ids) -> torch.Tensor:
        return self._embed(as_ids(ids, self.device)[None])[0]

    @abstractmethod
    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, T] -> the residual stream [B, T, hidden] entering the first layer."""

    @abstractmethod
    def _final_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        """The residual [..., hidden] after the last layer, normalised and in the LM head's dtype."""
