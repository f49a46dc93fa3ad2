"""A word-level test backbone whose native keys and queries are a fixed function of the token.

Filler words share one key direction (plus a little noise), every other word has its own
random direction, and a token's query equals its key. So inside a chunk of filler text a rare
word is the most distinctive key, and a question naming that word has a query identical to
the address of a note written around it. The recurrent state is a decayed sum of value-key
outer products per channel, so answers depend on the state, replay and question.
"""

from __future__ import annotations

import re
from typing import Sequence

import torch

from memexp.backbones.base import Backbone, Channel, State, Tokenizer, as_ids

FILLER = ["the", "grass", "is", "green", "sky", "blue", "and", "here", "we", "go", "again", "there", "of", "code", "river"]
RARE = ["zebra", "seven", "giraffe", "purple", "tell", "me", "about", "what", "kite", "nine"]


class WordTokenizer(Tokenizer):
    """Words, punctuation and line breaks of a fixed vocabulary; id 0 is EOS, id 1 is BOS
    (used only when `bos_id` is set)."""

    def __init__(self, words: Sequence[str] = FILLER + RARE) -> None:
        self.vocab = ["</s>", "<s>", "\n", ".", "?", ","] + list(words)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.bos_id, self.eos_id = None, 0

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        bos = [self.bos_id] if add_bos and self.bos_id is not None else []
        return bos + [self.index[w] for w in re.findall(r"\n|<s>|\w+|[^\w\s]", text)]

    def decode(self, ids: Sequence[int]) -> str:
        out = ""
        for i in ids:
            w = self.vocab[int(i)]
            if w in ("<s>", "</s>"):
                continue
            out += w if (w in ".?,\n" or not out or out.endswith("\n")) else " " + w
        return out


class SpacedTokenizer(WordTokenizer):
    """WordTokenizer where each space is a token too (as in byte-level and many BPE vocabularies),
    so any text put between replayed notes or before the question shows up as ids."""

    def __init__(self) -> None:
        super().__init__(FILLER + RARE + [" "])

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        bos = [self.bos_id] if add_bos and self.bos_id is not None else []
        return bos + [self.index[w] for w in re.findall(r"\n|<s>|\w+|[^\w\s]| ", text)]


class ToyState(State):
    def __init__(self, memory: torch.Tensor, position: int = 0) -> None:
        self.memory = memory  # [L, H, d_v, d_k] fp64
        self.position = position

    def clone(self) -> "ToyState":
        return ToyState(self.memory.clone(), self.position)

    def nbytes(self) -> int:
        return self.memory.numel() * self.memory.element_size()

    def scale_recurrent(self, lam: float) -> None:
        self.memory.mul_(lam)


class ToyBackbone(Backbone):
    """`layers` x `heads` channels of width `d_k`; features are handed to the observer in
    pieces of `piece` tokens so observers see chunks split across calls."""

    name = "toy"

    def __init__(self, layers: int = 4, heads: int = 6, d_k: int = 16, piece: int = 96, seed: int = 0,
                 tokenizer: WordTokenizer | None = None) -> None:
        self.tokenizer = tokenizer or WordTokenizer()
        self.device, self.dtype = torch.device("cpu"), torch.float32
        self.layers, self.heads, self.d_k, self.piece = layers, heads, d_k, piece
        self.channels = [Channel(layer, head, d_k) for layer in range(layers) for head in range(heads)]
        g = torch.Generator().manual_seed(seed)
        vocab = len(self.tokenizer.vocab)
        raw = torch.randn(layers, heads, vocab, d_k, generator=g)
        # a space token (SpacedTokenizer) is as common as filler, so it shares the filler direction
        filler = [self.tokenizer.index[w] for w in FILLER + [".", " "] if w in self.tokenizer.index]
        common = torch.randn(layers, heads, 1, d_k, generator=g)
        raw[:, :, filler] = common + 0.1 * raw[:, :, filler]
        self.keys = torch.nn.functional.normalize(raw, dim=-1)  # [L, H, V, d_k]
        self.values = torch.randn(layers, heads, vocab, d_k, generator=g, dtype=torch.float64)
        self.readout = torch.randn(vocab, layers * heads * d_k, generator=g, dtype=torch.float64)
        self.decay = 0.98
        self.calls: list[tuple[int, bool]] = []  # (tokens, observed) per forward call

    def init_state(self) -> ToyState:
        return ToyState(torch.zeros(self.layers, self.heads, self.d_k, self.d_k, dtype=torch.float64))

    def forward(self, state: ToyState, ids, observer=None) -> torch.Tensor:
        ids = as_ids(ids)
        self.calls.append((len(ids), observer is not None))
        for start in range(0, len(ids), self.piece):
            piece = ids[start : start + self.piece]
            k = self.keys[:, :, piece]  # [L, H, T, d_k]
            if observer is not None:
                for layer in range(self.layers):
                    observer(layer, start, k[layer].transpose(0, 1), k[layer].transpose(0, 1))
            weights = self.decay ** torch.arange(len(piece) - 1, -1, -1, dtype=torch.float64)
            update = torch.einsum("t,lhtv,lhtk->lhvk", weights, self.values[:, :, piece], k.double())
            state.memory.mul_(self.decay ** len(piece)).add_(update)
            state.position += len(piece)
        last = self.keys[:, :, ids[-1]].double()  # [L, H, d_k]
        read = torch.einsum("lhvk,lhk->lhv", state.memory, last).reshape(-1)
        return (self.readout @ read).float()

    def input_embeddings(self, ids) -> torch.Tensor:
        """The first channel's key of each token: filler words share a direction, rare words not."""
        return self.keys[0, 0, as_ids(ids)]
