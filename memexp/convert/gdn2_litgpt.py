"""Convert a LitGPT GDN-2 checkpoint (NVlabs' gdn2_1.3B, e.g. model-100b.pth of
LLM-OS-Models2/gdn2-1.3b-paper-matched) into a memexp checkpoint directory:

    config.json          memexp's GDN-2 config (model_type gdn2_litgpt), inferred from shapes
    model.safetensors    the model tensors under LitGPT's names (optimizer state dropped)
    tokenizer files      copied from --tokenizer (TinyLlama/TinyLlama_v1.1 for the paper)

The result loads with `backbone=gdn2 backbone.pretrained=<out>`; it holds ~2.9 GB in bf16
instead of the 17 GB training checkpoint.

    memexp convert gdn2-litgpt model-100b.pth out/gdn2-1.3b --tokenizer TinyLlama/TinyLlama_v1.1
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from memexp.backbones.gdn2.model import GDN2Config, read_litgpt_state_dict
from memexp.backbones.loading import TOKENIZER_FILES, resolve_pretrained
from memexp.convert.tokenizer_files import copy_tokenizer_files


def copy_tokenizer(source: str, out: Path) -> list[str]:
    directory = resolve_pretrained(source, patterns=TOKENIZER_FILES)
    return copy_tokenizer_files(directory, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memexp convert gdn2-litgpt", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="LitGPT .pth (state dict, possibly under 'model')")
    parser.add_argument("out", type=Path, help="output directory")
    parser.add_argument("--tokenizer", default="TinyLlama/TinyLlama_v1.1", help="tokenizer directory or hub id")
    parser.add_argument("--dtype", choices=["keep", "bfloat16", "float32"], default="keep",
                        help="tensor dtype in the output (A_log and dt_bias are always kept in fp32)")
    args = parser.parse_args(argv)

    sd = read_litgpt_state_dict(args.checkpoint)
    config = GDN2Config.from_state_dict(sd, str(args.checkpoint))
    args.out.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, t in sd.items():
        if args.dtype != "keep" and t.is_floating_point() and not name.endswith(("A_log", "dt_bias")):
            t = t.to(getattr(torch, args.dtype))
        tensors[name] = t.contiguous()
    save_file(tensors, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    (args.out / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    copied = copy_tokenizer(args.tokenizer, args.out) if args.tokenizer else []
    params = sum(t.numel() for t in tensors.values())
    print(f"{args.out}: {len(tensors)} tensors, {params:,} parameters, {config.num_hidden_layers} GDN-2 layers, "
          f"tokenizer files: {', '.join(copied) or 'none'}")
    return 0
