"""The native memory interface: what every backbone offers to the methods.

Methods talk only to `Backbone`, `State`, `Channel`, `Observer` and `Tokenizer`. A backbone
processes one sequence at a time (batch 1): ids are 1-D LongTensors or lists of ints.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol, Sequence

import torch


@dataclass(frozen=True)
class Channel:
    """One addressable recurrent channel: a GDN key head, a Mamba-2 B/C group."""

    layer: int  # model layer index (0-based, counting every layer of the model)
    head: int  # head (GDN) or group (Mamba-2) within that layer
    d_k: int  # key / query width of the channel


class Observer(Protocol):
    """Receives native features chunk by chunk during `Backbone.forward`.

    Called once per recurrent layer per processed chunk, in layer order within a chunk and
    chunk order within the forward call. `start` is the offset of the chunk's first token
    inside the ids of the current `forward` call. `keys` and `queries` are [T, H, d_k],
    L2-normalised exactly as they enter the recurrence (after short conv, activation and
    L2 norm), in the backbone's compute dtype; `H` are the channels of that layer in
    `Backbone.channels` order. Nothing may keep them beyond what the observer reduces.
    """

    def __call__(self, layer: int, start: int, keys: torch.Tensor, queries: torch.Tensor) -> None: ...


class State(ABC):
    """Everything a backbone retains after reading a prefix: recurrent and conv states,
    KV caches, the position counter. Mutated in place by `Backbone.forward`."""

    position: int  # tokens processed so far; attention positions continue from here

    @abstractmethod
    def clone(self) -> "State":
        """A deep copy: every tensor, window, cache and counter; branches never share storage."""

    @abstractmethod
    def nbytes(self) -> int:
        """Bytes held by the state's tensors."""

    @abstractmethod
    def scale_recurrent(self, lam: float) -> None:
        """Multiply the recurrent (memory) state by `lam` in place; conv windows, KV caches
        and positions are kept. lam = 0 is the clean-start reset used for Mamba-2."""


class Tokenizer(ABC):
    """Narrow tokenizer interface: ids are plain Python ints."""

    bos_id: int | None
    eos_id: int | None

    @abstractmethod
    def encode(self, text: str, add_bos: bool = False) -> list[int]: ...

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str: ...

    @property
    def stop_ids(self) -> list[int]:
        """Token ids that end greedy generation by default."""
        return [self.eos_id] if self.eos_id is not None else []


class Backbone(ABC):
    """A pretrained model behind the native memory interface (batch size 1)."""

    name: str
    tokenizer: Tokenizer
    channels: list[Channel]
    device: torch.device
    dtype: torch.dtype  # compute dtype of weights/activations; recurrent states are fp32

    @abstractmethod
    def init_state(self) -> State:
        """The state before any token (position 0)."""

    @abstractmethod
    def forward(self, state: State, ids, observer: Observer | None = None) -> torch.Tensor:
        """Advance `state` in place over `ids` (any length >= 1, processed in bounded chunks)
        and return the fp32 logits [vocab] at the last position.

        Continuation is exact: forward(s, A); forward(s, B) equals forward(s, A + B)."""

    def train_forward(self, ids: torch.Tensor) -> torch.Tensor:
        """The grad-enabled training forward: ids [B, T] (int64) from the zero state -> logits
        [B, T, vocab] (compute dtype), on the same code path as `forward`."""
        raise NotImplementedError(f"{self.name} has no training forward")

    def input_embeddings(self, ids) -> torch.Tensor:
        """The input embedding rows [T, hidden] of `ids`: what the first layer reads (used by
        NoteBank's input-embedding routing control)."""
        raise NotImplementedError(f"{self.name} does not expose its input embeddings")

    @torch.no_grad()
    def generate(
        self,
        state: State,
        ids,
        max_new_tokens: int,
        stop: Sequence[int] | None = None,
        min_new_tokens: int = 0,
    ) -> list[int]:
        """Greedy decoding from `state` after feeding `ids`; returns the generated ids
        (including a stop id if one was produced). `stop=None` means the tokenizer's stop
        ids; `stop=[]` disables stopping. For the first `min_new_tokens` steps the stop ids
        cannot be chosen (the best other token is, as transformers' min-length rule does).
        The state is advanced over `ids` and every generated token but the last."""
        stop_set = set(self.tokenizer.stop_ids if stop is None else stop)
        barred = torch.tensor(sorted(stop_set), dtype=torch.long) if min_new_tokens else None
        logits = self.forward(state, ids)
        out: list[int] = []
        for i in range(max_new_tokens):
            if i < min_new_tokens and barred.numel():
                logits = logits.clone()
                logits[barred.to(logits.device)] = float("-inf")
            nxt = int(torch.argmax(logits))
            out.append(nxt)
            if nxt in stop_set or i == max_new_tokens - 1:
                break
            logits = self.forward(state, [nxt])
        return out

    def chat_prompt(self, user: str, system: str | None = None) -> str:
        """The checkpoint's chat template around one user turn, ending with the assistant
        header. Only instruction-tuned backbones that ship a template have one."""
        raise NotImplementedError(f"{self.name} has no chat template; set backbone.chat=false")


_SPLIT = "\x00memexp-question\x00"


def chat_split(backbone: Backbone, context: str, prompt: str, system: str | None = None) -> tuple[str, str]:
    """(context, prompt) wrapped in the backbone's chat template as one user turn, split where
    the question starts: the template's head goes with the context, which is read once, and
    its tail (end of turn, assistant header) with every question."""
    head, sep, tail = backbone.chat_prompt(context + _SPLIT + prompt, system).partition(_SPLIT)
    if not sep:
        raise ValueError(f"{backbone.name}: the chat template altered the user turn; cannot split it")
    return head, tail


class InputFeed:
    """The ids the runner feeds for an example: its context once, then each question after it.

    Without a chat template: the context with BOS, then the question's prompt as it is. With one
    (`backbone.chat`): the context inside the template's head, which carries its own begin-of-text
    as apply_chat_template does (so no BOS is added), then the user prompt, the template's tail (end
    of turn, assistant header) and the answer prefix after it (RULER's prepare.py: model_template
    + answer_prefix). A benchmark that fits its inputs to a length (RULER) counts with the same feed,
    so the template's tokens count inside the length, as RULER's prepare.py counts them."""

    def __init__(self, backbone: Backbone, chat: bool = False) -> None:
        self.backbone, self.tokenizer, self.chat = backbone, backbone.tokenizer, chat

    def context_ids(self, context: str, system: str | None = None, bos: bool = True) -> list[int]:
        """`bos=False`: no begin-of-text before a plain context (formats trained without one)."""
        if not self.chat:
            return self.tokenizer.encode(context, add_bos=bos)
        return self.tokenizer.encode(chat_split(self.backbone, context, "", system)[0])

    def question_ids(self, context: str, user_prompt: str, answer_prefix: str = "",
                     system: str | None = None) -> list[int]:
        if not self.chat:
            return self.tokenizer.encode(user_prompt + answer_prefix)
        return self.tokenizer.encode(chat_split(self.backbone, context, user_prompt, system)[1] + answer_prefix)

    def template_fingerprint(self) -> str | None:
        """What the chat template adds around a user turn (None without chat): a benchmark's cache
        key, since the template's tokens change what fits a length."""
        if not self.chat:
            return None
        import hashlib

        head, tail = chat_split(self.backbone, "\x01", "\x02")
        return hashlib.sha256(f"{head}\x00{tail}".encode()).hexdigest()[:16]


def as_ids(ids, device: torch.device | None = None) -> torch.Tensor:
    """Accept a list of ints or a tensor of any integer dtype; return a 1-D int64 tensor."""
    t = ids if isinstance(ids, torch.Tensor) else torch.tensor(list(ids), dtype=torch.long)
    t = t.reshape(-1).to(dtype=torch.long)
    return t if device is None else t.to(device)


class Stopwatch:
    """Accumulates wall seconds per named stage; synchronises CUDA so GPU time is counted."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def stage(self, name: str) -> "_Stage":
        return _Stage(self, name)


class _Stage:
    def __init__(self, watch: Stopwatch, name: str) -> None:
        self.watch, self.name = watch, name

    def __enter__(self) -> None:
        _sync()
        self.t0 = time.perf_counter()

    def __exit__(self, *exc) -> None:
        _sync()
        dt = time.perf_counter() - self.t0
        self.watch.seconds[self.name] = self.watch.seconds.get(self.name, 0.0) + dt


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
