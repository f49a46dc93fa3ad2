"""Titan-Llama's schema and registration (light: no torch, so validating a config loads no model code)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from memexp.core.registry import METHODS
from memexp.core.schema import ConfigError, MethodConfig, _at_least, _choice, files_checked

DECAY_TARGETS = ("slow_weights", "zero")
MEMORY_DTYPES = ("float32", "bfloat16")


@dataclass
class TitanConfig(MethodConfig):
    """Titan-Llama (paper §3, App. A.2; the defaults follow the authors' released code)."""

    name: str = "titan"
    layers: int = 4  # the first N layers become Titan layers; the rest keep their attention
    segment_length: int = 512  # W: attention segment and memory chunk (the code asserts they are equal)
    memory: bool = True  # false: segmented attention without memory or gate (the paper's "segmented attn.")
    local_later_layers: bool = False  # App. C.1: the later layers become segmented attention without memory
    memory_path: Optional[str] = None  # trained modules (a folder TitanModules.save wrote); null = initial weights
    test_batch: int = 1024  # tokens per test-time batch: its chunks take their gradient at its starting weights
    max_lr: float = 1.0  # theta_t = max_lr * sigmoid(Linear(k_t))
    rope_memory: bool = True  # the memory reads and writes RoPE-rotated q / k (the code's memory_qk_rope)
    value_residual: bool = True  # Titan layers after the first mix their values toward the previous one's
    # what the per-chunk decay alpha pulls the fast weights toward: "slow_weights" (the code: W0) or
    # "zero" (the paper's text, M_c = (1 - alpha_c) M_{c-1} + S_c)
    decay_target: str = "slow_weights"
    # the dtype of the Titan modules' parameters and of the memory's computation and state (fast
    # weights, momentum, pending chunk): float32 (memexp's default, whatever the backbone's dtype) or
    # bfloat16 (the authors' runs: the whole model in bf16, fp32 copies only in their optimizer), to
    # load their checkpoints in the precision their numbers came from
    memory_dtype: str = "float32"

    def __post_init__(self) -> None:
        _at_least("method.layers", self.layers, 1)
        _at_least("method.segment_length", self.segment_length, 1)
        _at_least("method.test_batch", self.test_batch, 1)
        if self.test_batch % self.segment_length:
            raise ConfigError(f"method.test_batch={self.test_batch}: must be a multiple of method.segment_length="
                              f"{self.segment_length} (a test-time batch is whole chunks)")
        if not isinstance(self.max_lr, (int, float)) or isinstance(self.max_lr, bool) or not self.max_lr > 0:
            raise ConfigError(f"method.max_lr={self.max_lr!r}: must be a number > 0")
        _choice("method.decay_target", self.decay_target, DECAY_TARGETS)
        _choice("method.memory_dtype", self.memory_dtype, MEMORY_DTYPES)
        check_memory_folder(self.memory_path)


MODULE_FILES = ("titan_memory.json", "titan_memory.safetensors")  # what TitanModules.save writes


def check_memory_folder(path: Optional[str]) -> None:
    """`method.memory_path` (never a hub id) names a folder TitanModules.save wrote, before any model loads."""
    if path is None or not files_checked():
        return
    folder = Path(path).expanduser()
    if not folder.exists():
        raise ConfigError(f"method.memory_path={path!r}: no such file or directory")
    missing = [f for f in MODULE_FILES if not (folder / f).is_file()]
    if missing:
        raise ConfigError(f"method.memory_path={path!r}: not a Titan modules folder (needs {' and '.join(missing)})")


# Titan replaces the decoder layers of a Llama-style attention backbone (arch llama declares
# llama_layers; config.validate refuses any other backbone before it loads). Every field is read-side
# (memexp.methods.read_identity): the memory is written at test time while the context is read.
METHODS.register(TitanConfig.name, "memexp.methods.titan.method:Titan", schema=TitanConfig,
                 requires=("layer_replacement", "llama_layers"), costs="memexp.methods.titan.costs:TitanCosts")


@dataclass
class TitanSegmentedConfig(TitanConfig):
    """The paper's "segmented attn." control (Tables 2-4) as its own method name, so that one sweep
    runs full attention (plain), segmented attention and Titan-Llama side by side: Titan's layers
    with the memory and the gate off."""

    name: str = "titan_segmented"
    memory: bool = False


METHODS.register(TitanSegmentedConfig.name, "memexp.methods.titan.method:Titan", schema=TitanSegmentedConfig,
                 requires=("layer_replacement", "llama_layers"), costs="memexp.methods.titan.costs:TitanCosts")
