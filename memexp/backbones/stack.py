"""What every layer-stack backbone shares: a state of per-layer lists and the chunked forward.

Each architecture keeps its own layer math; this module holds the parts that are the same for
all of them, so that clone/nbytes/rescale and the bounded-chunk loop exist once.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import fields
from typing import Callable, ClassVar

import torch
from torch import nn

from memexp.backbones.base import Backbone, Observer, State, Tokenizer, as_ids
from memexp.backbones.loading import BackboneLoadError


class LayerStates(State):
    """A `State` held as dataclass fields that are per-layer lists plus `position`.

    List entries are tensors, objects with `clone()` and `nbytes()` (KV caches), or None
    for layers of another kind. `RECURRENT_FIELDS` names the lists that are recurrent memory:
    only those are scaled by `scale_recurrent`; conv windows and KV caches are not memory
    the methods rescale. Subclasses are dataclasses that declare their lists and
    `position: int = 0`.
    """

    RECURRENT_FIELDS: ClassVar[tuple[str, ...]] = ()

    def _layer_lists(self) -> dict[str, list]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "position"}

    def clone(self):
        copies = {name: [None if e is None else e.clone() for e in entries]
                  for name, entries in self._layer_lists().items()}
        return type(self)(**copies, position=self.position)

    def nbytes(self) -> int:
        total = 0
        for entries in self._layer_lists().values():
            for e in entries:
                if isinstance(e, torch.Tensor):
                    total += e.numel() * e.element_size()
                elif e is not None:
                    total += e.nbytes()
        return total

    def scale_recurrent(self, lam: float) -> None:
        for name in self.RECURRENT_FIELDS:
            for s in getattr(self, name):
                if s is not None:
                    s.mul_(lam)


def layer_emitter(observer: Observer | None, layer: int, start: int) -> Callable | None:
    """The `emit(keys, queries)` callback a recurrent layer calls, bound to its layer index and
    the chunk's offset, or None without an observer (the layer then skips the features)."""
    if observer is None:
        return None
    return lambda keys, queries: observer(layer, start, keys, queries)


class LayerStackBackbone(Backbone):
    """A causal LM with `model.lm_head` and `model.config`, run one bounded chunk at a time.

    Subclasses supply the hooks `_embed`, `_layers` and `_final_norm`; `forward` owns the
    chunk loop, the position counter and the LM head, so continuation behaves the same for
    every architecture.
    """

    def __init__(self, model: nn.Module, tokenizer: Tokenizer, name: str, prefill_chunk: int) -> None:
        self.model = model.eval()
        self.config = model.config
        self.tokenizer = tokenizer
        self.name = name
        self.prefill_chunk = prefill_chunk
        self.device = model.lm_head.weight.device
        self.dtype = model.lm_head.weight.dtype
        self.chat_template: str | None = None  # the checkpoint's Jinja chat template, when it ships one

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
    def forward(self, state: State, ids, observer: Observer | None = None) -> torch.Tensor:
        ids = as_ids(ids, self.device)
        if ids.numel() == 0:
            raise ValueError("forward needs at least one token")
        for start in range(0, ids.numel(), self.prefill_chunk):
            chunk = ids[start:start + self.prefill_chunk]
            last = self._layers(state, self._embed(chunk), observer, start)[0, -1]
        state.position += ids.numel()
        return self.model.lm_head(self._final_norm(last)).float()

    @torch.no_grad()
    def input_embeddings(self, ids) -> torch.Tensor:
        return self._embed(as_ids(ids, self.device))[0]

    @abstractmethod
    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """The residual stream [1, T, hidden] entering the first layer."""

    @abstractmethod
    def _layers(self, state: State, x: torch.Tensor, observer: Observer | None, start: int) -> torch.Tensor:
        """Advance every layer and `state` over one chunk; `start` is the chunk's offset inside
        the current forward call (`state.position` still counts the tokens before that call)."""

    @abstractmethod
    def _final_norm(self, last: torch.Tensor) -> torch.Tensor:
        """The last position's residual [hidden], normalised and in the LM head's dtype."""
