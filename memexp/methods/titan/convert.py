"""The authors' Titan-Llama checkpoint -> memexp's Titan modules folder (TitanModules.save's format).

    python -m memexp.methods.titan.convert latest_checkpoint.pt out/titan [--num-layers 16] [--segment-length 512]

The authors' code (titans-pytorch fork, `titan_llama.py`) keeps a Titan layer's trainable tensors
under `…layers.<i>.neural_memory.*` and `…layers.<i>.segmented_attn.to_learned_v_mix.0.*`; a
checkpoint is a state dict, possibly inside a training checkpoint (`model_state_dict`, `model`,
`state_dict`) and behind wrapper prefixes (`backbone.`, `module.`, `_orig_mod.`), which are ignored.
Their memory matrices use the same x @ W layout as memexp's. The backbone's own tensors (frozen
copies of q/k/v/o) are skipped; any other Titan tensor name is an error.

The config of the written folder: the Titan layers and the value residual as the tensors show them;
the backbone's layer count and the settings no tensor records (segment length, test-time batch,
max_lr, ...) from the options, whose defaults are the paper's Llama-3.2-1B setup.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

from memexp.core.schema import ConfigError
from memexp.methods.titan.config import DECAY_TARGETS, TitanConfig

# the authors' name after `layers.<i>.` -> memexp's after `layers.<i>.` (history_mix is b_lambda [H, d])
NAMES = {
    "neural_memory.memory_model_parameters.0": "memory.w1",
    "neural_memory.memory_model_parameters.1": "memory.w2",
    "neural_memory.memory_model_parameters.2": "memory.w3",
    "neural_memory.to_adaptive_step.0.weight": "memory.theta.weight",
    "neural_memory.to_adaptive_step.0.bias": "memory.theta.bias",
    "neural_memory.to_momentum.0.weight": "memory.eta.weight",
    "neural_memory.to_momentum.0.bias": "memory.eta.bias",
    "neural_memory.to_decay_factor.0.weight": "memory.alpha.weight",
    "neural_memory.to_decay_factor.0.bias": "memory.alpha.bias",
    "neural_memory.history_mix_proj.weight": "gate.weight",
    "neural_memory.history_mix": "gate.bias",
    "segmented_attn.to_learned_v_mix.0.weight": "value_mix.weight",
    "segmented_attn.to_learned_v_mix.0.bias": "value_mix.bias",
}
LAYER_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.((?:neural_memory|segmented_attn)\..+)$")
CONTAINERS = ("model_state_dict", "model", "state_dict")


class ConvertError(ValueError):
    """The input is not a Titan-Llama checkpoint this converter reads; one line saying why."""


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a .safetensors file or a torch checkpoint (a state dict, or one inside it)."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a pickle of arbitrary objects, or not a torch file
        raise ConvertError(f"{path}: not a torch checkpoint of tensors and plain values ({type(e).__name__})") from None
    for key in CONTAINERS:
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict) or not any(torch.is_tensor(v) for v in obj.values()):
        raise ConvertError(f"{path}: found no state dict (top level or under {', '.join(CONTAINERS)})")
    return {k: v for k, v in obj.items() if torch.is_tensor(v)}


def convert_state_dict(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Authors' names -> memexp's TitanModules names (`layers.<i>.…`), gate bias flattened to [H d]."""
    out = {}
    for key, t in sd.items():
        m = LAYER_KEY.search(key)
        if m is None:
            continue
        layer, rest = m.groups()
        if rest.startswith("segmented_attn.") and rest not in NAMES:
            continue  # the attention's own projections: frozen copies of the backbone's
        if rest not in NAMES:
            raise ConvertError(f"{key}: no memexp counterpart (known: {', '.join(sorted(NAMES))})")
        out[f"layers.{layer}.{NAMES[rest]}"] = t.reshape(-1) if rest.endswith("history_mix") else t
    if not out:
        raise ConvertError("no Titan tensors (…layers.<i>.neural_memory.*) in the checkpoint")
    return out


def infer(tensors: dict[str, torch.Tensor], num_layers: int, layers: int | None = None,
          local_later_layers: bool = False, **settings) -> tuple[TitanConfig, dict[str, int]]:
    """The config and backbone shapes of the converted tensors (`tensors` loses the memory and gate
    tensors of layers >= `layers`: the authors' segmented-only layers carry an unused NeuralMemory)."""
    memory_layers = sorted({int(k.split(".")[1]) for k in tensors if ".memory." in k})
    if memory_layers != list(range(len(memory_layers))):
        raise ConvertError(f"memory layers {memory_layers}: memexp's Titan converts the first N layers, 0 .. N-1")
    if layers is not None:
        if not 1 <= layers <= len(memory_layers):
            raise ConvertError(f"--layers {layers}: the checkpoint has memories in layers 0 .. {len(memory_layers) - 1}")
        unused = (".memory.", ".gate.")  # what the authors' NeuralMemory holds
        for key in [k for k in tensors if any(u in k for u in unused) and int(k.split(".")[1]) >= layers]:
            del tensors[key]
        memory_layers = memory_layers[:layers]
    first = f"layers.{memory_layers[0]}"
    Hk, hd = tensors[f"{first}.memory.w1"].shape[:2]
    hidden = tensors[f"{first}.gate.weight"].shape[1]
    heads = tensors[f"{first}.gate.weight"].shape[0] // hd
    later = {int(k.split(".")[1]) for k in tensors} - set(memory_layers)
    cfg = TitanConfig(layers=len(memory_layers), local_later_layers=local_later_layers or bool(later),
                      value_residual=any(".value_mix." in k for k in tensors), **settings)
    shapes = {"hidden_size": hidden, "num_attention_heads": heads, "kv_heads": Hk, "head_dim": hd,
              "num_hidden_layers": num_layers}
    return cfg, shapes


def convert(src: str | Path, dst: str | Path, num_layers: int = 16, layers: int | None = None,
            local_later_layers: bool = False, **settings) -> Path:
    """Read the authors' checkpoint `src`, write memexp's folder `dst`; returns `dst`. `layers`: the
    Titan layers with memory (default: every layer with memory tensors); `local_later_layers`: the
    App. C.1 variant (implied when later layers have value mixers); `settings`: TitanConfig fields."""
    from memexp.methods.titan.retrofit import TitanModules

    tensors = convert_state_dict(read_state_dict(Path(src)))
    cfg, shapes = infer(tensors, num_layers, layers, local_later_layers, **settings)
    modules = TitanModules(cfg, shapes)
    missing, unexpected = modules.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    if missing or unexpected:
        raise ConvertError(f"{src}: tensors do not fit {cfg.layers} Titan layers of these shapes: "
                           f"missing {missing[:3]}, unexpected {unexpected[:3]}")
    modules.save(dst)
    return Path(dst)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m memexp.methods.titan.convert", description=__doc__.splitlines()[0])
    p.add_argument("src", help="the authors' checkpoint (.pt / .bin / .safetensors)")
    p.add_argument("dst", help="the folder to write (titan_memory.safetensors + titan_memory.json)")
    d = TitanConfig()
    p.add_argument("--num-layers", type=int, default=16, help="the backbone's layer count (Llama-3.2-1B: 16)")
    p.add_argument("--layers", type=int, default=None, help="Titan layers with memory (default: all with memory tensors)")
    p.add_argument("--local-later-layers", action="store_true", help="the App. C.1 variant")
    p.add_argument("--segment-length", type=int, default=d.segment_length)
    p.add_argument("--test-batch", type=int, default=d.test_batch)
    p.add_argument("--max-lr", type=float, default=d.max_lr)
    p.add_argument("--no-rope-memory", dest="rope_memory", action="store_false")
    p.add_argument("--decay-target", choices=DECAY_TARGETS, default=d.decay_target)
    a = p.parse_args(argv)
    try:
        out = convert(a.src, a.dst, a.num_layers, a.layers, a.local_later_layers, segment_length=a.segment_length, test_batch=a.test_batch,
                      max_lr=a.max_lr, rope_memory=a.rope_memory, decay_target=a.decay_target)
    except (ConvertError, ConfigError) as e:
        raise SystemExit(f"error: {e}") from None
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
