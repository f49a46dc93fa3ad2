"""Lexical bag heads: layer-0 GDN heads whose key and query are a bag of the words around t.

Why: NoteBank's native router (paper Eq. 4-5) scores a note by the cosine between the
question's queries and the query at the note's most distinctive key, channel by channel. The
trained tiny_gdn_words channels do not match words that way (docs/benchmarks.md, "why native
routing misses the needle"); a head whose query is the mean of the last c tokens' projections
and whose key is the mean of the c - 1 tokens before t meets the question wherever the two
share rare words. Its projection is orthogonal to the text-weighted mean direction of the
layer's normalised inputs (the frequent words' common part, about a quarter of the text's squared
norm in the shipped model), and small (std `scale` over the vocabulary), so the SiLU after the
conv stays near linear and bags of unrelated words meet near cosine 0 instead of the positive
floor a ReLU-like SiLU gives every pair.

The heads are part of the model's computation (their values and outputs train as any other);
only their convs and q/k projections are held to this form. The checkpoint stays a plain GDN.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from memexp.backbones.norms import rms_norm


def weighted_mean_direction(x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """The unit mean of the rows of x [V, D] weighted by counts [V] -> [D]."""
    return F.normalize((counts[:, None] * x).sum(0), dim=0)


def lexical_projection(x: torch.Tensor, mean: torch.Tensor, basis: torch.Tensor, scale: float) -> torch.Tensor:
    """`basis` [d_k, D] with every row made orthogonal to the unit `mean` [D], scaled so its
    outputs over the rows of x [V, D] have std `scale` -> [d_k, D]."""
    r = basis - (basis @ mean)[:, None] * mean[None]
    return r * scale / (x @ r.T).std()


# the whitening's eigenvalue floor, as a share of the mean eigenvalue: the recipe's, and the probe script's default
WHITEN_EPS = 1e-3


def text_whitening(x: torch.Tensor, counts: torch.Tensor, mean: torch.Tensor, eps: float = WHITEN_EPS) -> torch.Tensor:
    """C^(-1/2) P [D, D]: P = I - mean mean^T removes the unit `mean` [D], and C is the
    count-weighted second moment of the rows of x P (x [V, D], counts [V]), its diagonal raised by
    `eps` x its mean eigenvalue. A frequent word's direction carries much of C, so whitening
    shrinks it against rare words (an IDF-like weight): a bag of words is then led by its rare
    words, and training cannot make the frequent ones lead by moving the embeddings."""
    eye = torch.eye(x.shape[1], dtype=x.dtype)
    p = eye - torch.outer(mean, mean)
    xp = x @ p
    c = (counts[:, None] * xp).T @ xp / counts.sum()
    c = c + eps * torch.trace(c) / x.shape[1] * eye
    values, vectors = torch.linalg.eigh(c)
    return vectors @ torch.diag(values.rsqrt()) @ vectors.T @ p


@torch.no_grad()
def wire_bag_convs(q_conv: torch.Tensor, k_conv: torch.Tensor, rows: slice, key: str = "bag",
                   key_taps: int | None = None) -> None:
    """In place on conv weights [C, 1, c] (taps oldest first, the last is t): the query rows average
    all c taps (t .. t-c+1); the key rows average t-1 .. t-c+1 (key="bag"; with `key_taps` K only
    t-1 .. t-K) or pass t (key="current")."""
    taps = q_conv.shape[-1]
    q_conv[rows] = 1.0 / taps
    k_conv[rows] = 0.0
    if key == "bag":
        bag = key_taps or taps - 1
        k_conv[rows, 0, -1 - bag:-1] = 1.0 / bag
    else:
        k_conv[rows, 0, -1] = 1.0


class LexicalHeads:
    """Hold the last `count` heads of layer 0 as lexical bag heads during training.

    `observe(inputs)` adds a batch's token ids to the running counts; `apply()` (after every
    optimizer step, and once before training) re-wires the heads' conv taps and sets their
    q_proj = k_proj rows to fixed random bases (seeded) made orthogonal to the current
    embeddings' count-weighted mean direction (with `whiten`, applied after text_whitening) and
    rescaled to std `scale` over the vocabulary.
    The counts start from the first batch; before any, the vocabulary's plain mean is used."""

    def __init__(self, model, count: int, scale: float, seed: int, whiten: bool = False) -> None:
        self.whiten = whiten
        self.attn = model.model.layers[0].attn
        self.norm = model.model.layers[0].attn_norm
        self.embeddings = model.model.embeddings
        self.scale = scale
        head_dim, heads = self.attn.c.head_dim, self.attn.c.num_heads
        self.rows = [slice(h * head_dim, (h + 1) * head_dim) for h in range(heads - count, heads)]
        generator = torch.Generator().manual_seed(seed)
        width = self.embeddings.weight.shape[1]
        self.bases = [torch.randn(head_dim, width, generator=generator) for _ in self.rows]
        self.counts = torch.zeros(self.embeddings.weight.shape[0])

    def observe(self, inputs: torch.Tensor) -> None:
        """Count a batch's input ids [B, T] (its padding too, as the layer sees it)."""
        if not self.rows:
            return
        self.counts += torch.bincount(inputs.reshape(-1), minlength=self.counts.numel())[: self.counts.numel()]

    @torch.no_grad()
    def apply(self) -> None:
        if not self.rows:
            return
        x = rms_norm(self.embeddings.weight.float(), self.norm.weight.float(), self.norm.eps)
        counts = self.counts if self.counts.sum() > 0 else torch.ones_like(self.counts)
        mean = weighted_mean_direction(x, counts)
        white = text_whitening(x, counts, mean) if self.whiten else None
        for rows, basis in zip(self.rows, self.bases):
            wire_bag_convs(self.attn.q_conv1d.weight, self.attn.k_conv1d.weight, rows)
            projection = lexical_projection(x, mean, basis if white is None else basis @ white, self.scale)
            self.attn.q_proj.weight[rows] = projection
            self.attn.k_proj.weight[rows] = projection


# Shared by the probes in scripts/probe/ (key_head_probe, lexical_route_heads, whitened_token_weights)

CONVS = ("q_conv1d", "k_conv1d", "v_conv1d")
TEXT_STREAM = 555  # the recipe generator's stream for the token counts (a training-side seed)


def widen_convs(weights: dict[str, torch.Tensor], conv_size: int) -> dict[str, torch.Tensor]:
    """The short convs' weights [C, 1, c] padded to [C, 1, conv_size] with zeros on the oldest taps
    (the last tap stays the current token), so every output is unchanged."""
    out = dict(weights)
    for name, w in weights.items():
        if name.rsplit(".", 2)[-2] in CONVS:
            if w.shape[-1] > conv_size:
                raise ValueError(f"{name}: {w.shape[-1]} taps, more than --conv-size {conv_size}")
            out[name] = F.pad(w, (conv_size - w.shape[-1], 0))
    return out


def token_counts(tokenizer, vocab_size: int, examples: int, seed: int = TEXT_STREAM,
                 documents: bool = False) -> torch.Tensor:
    """How often each token id occurs in `examples` training examples of the six tasks at 1K
    tokens (the recipe's generator, stream `seed`) -> [vocab_size]; with `documents`, in how many
    of the examples it occurs (document frequency, the classic IDF's count)."""
    from memexp.embedded import niah_words

    counts = torch.zeros(vocab_size)
    for i in range(examples):
        ids = torch.tensor(niah_words.example(tokenizer, niah_words.SIX_TASKS[i % 6], 1024, niah_words.stream(seed, i)).ids)
        counts += torch.bincount(ids.unique() if documents else ids, minlength=vocab_size)[:vocab_size]
    return counts
