"""InfLLM's schema and registration (light: no torch, so validating a config loads no model code).

Every default is the official one, traced to thunlp/InfLLM @ 12b7079:
- block_size 128, n_init 128, n_local 4096, topk 16, repr_topk 4, max_cached_block 32,
  exc_block_size 512, chunk_size 8192, distance_scale 1.0: config/llama-3-inf-llm.yaml and
  config/mistral-inf-llm.yaml (the same values in both; vicuna and minicpm use n_local 2048,
  mistral-inf-llm-12k topk 64);
- base: each config's `base` is its model's RoPE base (500000 for Llama-3, 10000 for Vicuna), so
  null here reads the backbone's own rope_theta (utils/patch.py does the same when none is given);
- cache_strategy "lru", score_decay none, chunk_topk_calc none, no faiss, no per-head retrieval:
  the defaults of attention/inf_llm.py's `inf_llm_forward`, which no shipped config overrides, so
  memexp implements those and has no fields for the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from memexp.core.registry import METHODS
from memexp.core.schema import ConfigError, MethodConfig, _at_least


@dataclass
class InfLLMConfig(MethodConfig):
    """InfLLM's context memory on every attention layer (official defaults)."""

    name: str = "infllm"
    block_size: int = 128  # tokens per memory block
    n_init: int = 128  # initial tokens every query attends
    n_local: int = 4096  # local window (the current chunk's queries see the last n_local keys)
    topk: int = 16  # memory blocks retrieved per query chunk (the NoteBank paper's Table 7 run: 96)
    repr_topk: int = 4  # representative tokens per block and head
    max_cached_block: int = 32  # memory blocks kept on the compute device per layer (LRU)
    exc_block_size: int = 512  # query chunk: retrieval happens once per chunk of this many tokens
    chunk_size: int = 8192  # prefill chunk (the backbone's forward is cut into pieces of this many tokens)
    base: Optional[float] = None  # InfLLM's own RoPE base; null = the backbone's rope_theta
    distance_scale: float = 1.0  # positions are multiplied by this inside InfLLM's RoPE

    def __post_init__(self) -> None:
        for field in ("block_size", "n_local", "topk", "repr_topk", "max_cached_block", "exc_block_size",
                      "chunk_size"):
            _at_least(f"method.{field}", getattr(self, field), 1)
        _at_least("method.n_init", self.n_init, 0)
        if self.repr_topk > self.block_size:
            raise ConfigError(f"method.repr_topk={self.repr_topk}: must be <= method.block_size={self.block_size}")
        if self.exc_block_size > self.n_local:  # the official ContextManager asserts it
            raise ConfigError(f"method.exc_block_size={self.exc_block_size}: must be <= method.n_local="
                              f"{self.n_local} (a query chunk never reaches past the local window)")
        if self.chunk_size % self.exc_block_size:
            raise ConfigError(f"method.chunk_size={self.chunk_size}: must be a multiple of method.exc_block_size="
                              f"{self.exc_block_size}, so query chunks do not depend on where prefill pieces end")
        if self.max_cached_block < self.topk:  # the official CudaCache cannot hold one chunk's blocks otherwise
            raise ConfigError(f"method.max_cached_block={self.max_cached_block}: must be >= method.topk={self.topk} "
                              f"(the device cache holds every block a query chunk retrieves)")
        if self.base is not None and not self.base > 0:
            raise ConfigError(f"method.base={self.base!r}: must be null (the backbone's rope_theta) or a number > 0")
        if not isinstance(self.distance_scale, (int, float)) or not self.distance_scale > 0:
            raise ConfigError(f"method.distance_scale={self.distance_scale!r}: must be a number > 0")


# InfLLM replaces the softmax attention layers of a backbone (arch llama: all of them; arch qwen35:
# its full-attention layers); config.validate refuses a backbone without them before it loads. Every
# field is read-side (memexp.methods.read_identity): the context's blocks are retrieved while it is read.
METHODS.register(InfLLMConfig.name, "memexp.methods.infllm.method:InfLLM", schema=InfLLMConfig,
                 requires=("layer_replacement", "softmax_attention"))
