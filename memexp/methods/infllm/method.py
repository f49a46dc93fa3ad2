"""`method=infllm`: read the context once through InfLLM's context memory, answer each question
from a copy of it, with the prompt cut where thunlp/InfLLM's GreedySearch cuts it.

The official GreedySearch (inf_llm/utils/greedy_search.py, run by benchmark/pred.py with the
config's `chunk_size`) feeds the whole prompt, context + question, but its last token in pieces of
`chunk_size` from the prompt's start, then the last token alone, then one token per step; inside
each call, query chunks of `exc_block_size` start at the call's first token. As `chunk_size` is a
multiple of `exc_block_size`, the query chunks of a prompt of L tokens are [0, E), [E, 2E), ... up
to token L - 1, then the last token: the chunk that holds the context's end also holds the
question's start. So `read` reads the context only up to its last multiple of `exc_block_size`
(boundaries every question's prompt shares) and keeps the rest, fewer than `exc_block_size`
tokens, as its payload; `answer` feeds that tail + the question but its last token in one call
(its query chunks start at that boundary, as the official ones do), then the last token alone.

`prepare` installs an InfLLM layer at every softmax attention layer (every layer of a Llama, the
full-attention layers of the Qwen3.5 hybrid, whose recurrent layers stay as they are), sharing
their weights, and sets the backbone's prefill chunk to `method.chunk_size` (a multiple of
`exc_block_size`, so the backbone's own prefill pieces move no query-chunk boundary).

Figures (JSON, in each record): `infllm_host_kv_bytes` (the blocks' KV where they are stored: the
host on a GPU machine; Table 7's "CPU archive"), `infllm_blocks`, `infllm_device_cache_bytes`,
`infllm_block_loads` (host -> device copies) and `device_peak_bytes` (the CUDA allocator's peak so
far in the process, weights included; null on a CPU).
"""

from __future__ import annotations

import torch

from memexp.backbones.base import Backbone, Stopwatch
from memexp.core.schema import ConfigError
from memexp.core.types import Question
from memexp.methods.base import Answer, Memory, Method
from memexp.methods.infllm.config import InfLLMConfig
from memexp.methods.infllm.context_memory import ContextMemory, Settings
from memexp.methods.infllm.layer import GatedInfLLMLayer, InfLLMLayer
from memexp.methods.plain.method import prefill


class InfLLM(Method[list[int]]):
    """The payload (`Memory.extra`) is the context's tail after its last query-chunk boundary."""

    name = "infllm"

    def __init__(self, cfg: InfLLMConfig | None = None) -> None:
        self.cfg = cfg or InfLLMConfig()
        self.settings: Settings | None = None

    def prepare(self, backbone: Backbone) -> None:
        if self.settings is not None:
            raise RuntimeError("InfLLM.prepare: this method already converted a backbone")
        layers = getattr(backbone, "layers", None)
        kinds = [] if layers is None else [infllm_layer_kind(layer) for layer in layers]
        if not any(kinds):
            raise ConfigError(f"method=infllm: backbone={getattr(backbone, 'name', backbone)!r} has no untouched "
                              f"softmax attention layers (arch llama or qwen35) for InfLLM to replace")
        if backbone.window is not None:
            raise ConfigError(f"method=infllm: backbone.window={backbone.window} is set; InfLLM brings its own local "
                              f"window (method.n_local), so use it on the full-attention backbone (backbone.window=null)")
        base = self.cfg.base if self.cfg.base is not None else rope_theta(backbone.config)
        self.settings = Settings.make(self.cfg, backbone.rope.rotary_dim, base, backbone.device)
        for i, kind in enumerate(kinds):
            if kind:
                backbone.replace_layer(i, kind(layers[i], self.settings))
        backbone.prefill_chunk = self.cfg.chunk_size

    def read(self, backbone: Backbone, context_ids: list[int]) -> Memory[list[int]]:
        self._require_prepared()
        context_ids = [int(i) for i in context_ids]
        shared = shared_prefix(len(context_ids), self.cfg.exc_block_size)
        state, seconds = prefill(backbone, context_ids[:shared])
        return Memory(state=state, context_len=len(context_ids), seconds=seconds, stats=footprint(state),
                      extra=context_ids[shared:])

    def answer(self, backbone: Backbone, memory: Memory[list[int]], question_ids: list[int], question: Question,
               stop: list[int] | None = None) -> Answer:
        self._require_prepared()
        if not question_ids:  # the prompt's last token would be the context's, which read may have read in a chunk
            raise ValueError("InfLLM.answer: empty question_ids (the prompt's last token must be the question's)")
        watch = Stopwatch()
        state = memory.state.clone()
        rest = memory.extra + [int(i) for i in question_ids]  # the prompt after the shared prefix
        with watch.stage("generate"):
            if len(rest) > 1:  # GreedySearch: the prompt but its last token, then the last token alone
                backbone.forward(state, rest[:-1])
            ids = backbone.generate(state, rest[-1:], question.max_new_tokens, stop, question.min_new_tokens)
        return Answer(ids=ids, seconds=watch.seconds, stats=footprint(state),
                      tokens={"question": len(question_ids), "generated": len(ids)})

    def _require_prepared(self) -> None:
        if self.settings is None:
            raise RuntimeError("InfLLM: call prepare(backbone) first (the runner does)")


def shared_prefix(context_len: int, exc_block_size: int) -> int:
    """How many context tokens every question's official prompt cuts alike: up to the context's last
    multiple of `exc_block_size`. The official query chunks of context + question (L tokens, the
    question at least one) end at each multiple of it below L - 1 and at L - 1; every multiple up to
    the context's length is among them whatever the question, the next one depends on its length."""
    return context_len - context_len % exc_block_size


def infllm_layer_kind(layer) -> type[InfLLMLayer] | None:
    """The InfLLM layer that replaces `layer`, or None for a layer InfLLM leaves alone (a
    recurrent layer of the hybrid, or one another method already replaced)."""
    from memexp.backbones.attention.model import DecoderLayer as LlamaLayer
    from memexp.backbones.hybrid.model import DecoderLayer as HybridLayer

    if type(layer) is LlamaLayer:
        return InfLLMLayer
    if type(layer) is HybridLayer and layer.kind != "linear_attention":
        return GatedInfLLMLayer
    return None


def rope_theta(config) -> float:
    """The backbone's RoPE base, in either transformers layout (InfLLM's default `base`); InfLLM's
    own RoPE ignores the backbone's scaling (llama3, yarn), as the official patch.py does."""
    params = getattr(config, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def footprint(state) -> dict:
    """Where the layers' context memory lives, summed over layers (JSON)."""
    memories = [s for s in state.layers if isinstance(s, ContextMemory)]
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return {
        "infllm_host_kv_bytes": sum(m.host_bytes() for m in memories),
        "infllm_blocks": sum(len(m.blocks) for m in memories),
        "infllm_device_cache_bytes": sum(m.cache_bytes() for m in memories),
        "infllm_block_loads": sum(m.loads for m in memories),
        "device_peak_bytes": peak,
    }
