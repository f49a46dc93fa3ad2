"""Greedy decoding in static shapes, one CUDA graph replay per token.

The papers time decoding with CUDA graphs over a static KV buffer (Titan-Llama, Fig. 4): per-token
latency is then the GPU's, not Python's launch overhead. `Backbone.forward` cannot be captured: its
KV caches grow, and positions are host integers. `StaticDecoder` takes a state that has read a
context and decodes from it through the same layers, with

- every KV cache copied into a `StaticKVCache` of fixed capacity (context + the tokens to decode),
  written at a device-side position and read through a mask;
- the position, the fed token, the logits and the generated ids in fixed device tensors;
- recurrent states (GDN, Mamba-2 and the hybrid's GDN layers) written back into their own
  tensors after every step, since a layer returns new ones;
- any other layer state in the fixed form its layer gives (`Layer.static_state`: Titan's segment in a
  ring of W rows and its memory's fast weights in fixed tensors, whose test-time update at a chunk's
  end runs eagerly on the device between two replays, as the papers' decode does);

so one step runs the same kernels every time, without a host synchronisation, and `capture()`
records it as a CUDA graph that `step()` then replays. The next token is chosen on the device
(greedy argmax) and fed to the following step, so `generate(n)` synchronises once, at the end.
A layer with no static form is refused with one line naming it.
"""

from __future__ import annotations

import torch

from memexp.backbones.kv_cache import KVCache, StaticKVCache
from memexp.backbones.stack import LayerContext, LayerStackBackbone, RecurrentState, StackState


class StaticDecoder:
    """Decode up to `max_new_tokens` greedy tokens from `state` (which is not modified).

    Usage: `dec = StaticDecoder(backbone, state, n); dec.feed(first_token); dec.capture()` (CUDA,
    optional); then `dec.step()` n times (each returns the logits [vocab] fp32 of the fed token and
    feeds the argmax to the next step), or `dec.generate(n)` for the ids."""

    def __init__(self, backbone: LayerStackBackbone, state: StackState, max_new_tokens: int) -> None:
        self.backbone = backbone
        self.max_new_tokens = max_new_tokens
        device = backbone.device
        self.position = torch.tensor([state.position], device=device)
        self.count = torch.zeros(1, dtype=torch.long, device=device)
        self.token = torch.zeros(1, dtype=torch.long, device=device)
        self.ids = torch.zeros(max_new_tokens, dtype=torch.long, device=device)
        self.logits = torch.zeros(backbone.model.lm_head.out_features, dtype=torch.float32, device=device)
        capacity = state.position + max_new_tokens
        self.states = [self._static(i, layer, s, capacity) for i, (layer, s) in
                       enumerate(zip(backbone.layers, state.layers))]
        self.steps = 0
        self.graph: torch.cuda.CUDAGraph | None = None

    def _static(self, index: int, layer, state, capacity: int):
        if isinstance(state, KVCache):
            return StaticKVCache.from_cache(state, capacity, self.position)
        if isinstance(state, RecurrentState):
            return state.clone()
        static = layer.static_state(state, self.position)
        if static is None:
            raise ValueError(f"static decoding: layer {index}'s state is a {type(state).__name__}, which its layer "
                             f"cannot give in fixed tensors (Layer.static_state)")
        return static

    def feed(self, token: int) -> None:
        """The token the next step reads (afterwards each step feeds its own argmax)."""
        self.token.fill_(token)

    @torch.no_grad()
    def _step(self) -> None:
        bb = self.backbone
        rope = bb.rope
        ctx = LayerContext(self.position, 0, None if rope is None else rope.cos_sin(self.position, bb.dtype))
        layers = list(self.states)
        hidden = bb._run_layers(bb._embed(self.token[None]), layers, ctx)
        for static, new in zip(self.states, layers):
            if new is not static:  # a recurrent layer returned new tensors: keep the static ones current
                static.recurrent.copy_(new.recurrent)
                if static.conv is not None:
                    static.conv.copy_(new.conv)
        self.logits.copy_(bb.model.lm_head(bb._final_norm(hidden[0, -1])).float())
        self.token.copy_(self.logits.argmax().view(1))
        self.ids.index_copy_(0, self.count, self.token)
        self.position.add_(1)
        self.count.add_(1)

    def capture(self, warmup: int = 2) -> None:
        """Record one step as a CUDA graph (after `warmup` eager steps on a side stream, which compile
        and autotune the kernels; their effect on the state is undone before the capture)."""
        if self.backbone.device.type != "cuda":
            raise RuntimeError("StaticDecoder.capture needs a CUDA device")
        saved = self._tensors_snapshot()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(stream)
        self._restore(saved)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()

    def step(self) -> torch.Tensor:
        """Decode one token: the logits [vocab] of the fed token (a fixed tensor, overwritten by the next step)."""
        if self.steps >= self.max_new_tokens:
            raise RuntimeError(f"StaticDecoder: its buffers hold {self.max_new_tokens} tokens, all decoded")
        if self.graph is not None:
            self.graph.replay()
        else:
            self._step()
        for s in self.states:
            if not isinstance(s, RecurrentState):
                s.after_step()
        self.steps += 1
        return self.logits

    def generate(self, n: int) -> list[int]:
        """`n` greedy steps; the ids each chose (one synchronisation, at the end)."""
        start = self.steps
        for _ in range(n):
            self.step()
        return self.ids[start:start + n].tolist()

    def _tensors_snapshot(self) -> list[torch.Tensor]:
        return [t.clone() for t in self._tensors()]

    def _restore(self, saved: list[torch.Tensor]) -> None:
        for t, s in zip(self._tensors(), saved):
            t.copy_(s)

    def _tensors(self) -> list[torch.Tensor]:
        out = [self.position, self.count, self.token, self.ids, self.logits]
        for s in self.states:
            if isinstance(s, RecurrentState):
                out += [s.recurrent] + ([s.conv] if s.conv is not None else [])
            else:
                out += s.tensors()
        return out
