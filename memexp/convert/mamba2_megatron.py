"""Convert a Megatron-LM Mamba-2 checkpoint (nvidia/mamba2-8b-3t-4k:
release/mp_rank_00/model_optim_rng.pt plus its SentencePiece tokenizer) into a mamba_ssm
checkpoint directory that `backbone=mamba2_8b` loads:

    config.json          mamba_ssm MambaConfig (d_model, n_layer, ssm_cfg with ngroups, ...)
    model.safetensors    tensors under mamba_ssm's names (backbone.layers.<i>.mixer.*, ...)
    tokenizer files      tokenizer.model + tokenizer_config.json, and tokenizer.json when
                         transformers can convert the SentencePiece model here (it needs
                         `pip install -e ".[sentencepiece]"`); or the files of a --tokenizer
                         directory. The tokenizer.json encodes as SentencePiece does except
                         that a text starting with a space loses one dummy-prefix piece, as
                         transformers' own Llama tokenizer does.

Names: decoder.layers.<i>.* -> backbone.layers.<i>.* (mixer / norm already match; a norm fused
into in_proj as `mixer.in_proj.layer_norm_weight` becomes `norm.weight`),
embedding.word_embeddings.weight -> backbone.embedding.weight, decoder.final_norm.weight ->
backbone.norm_f.weight, output_layer.weight -> lm_head.weight; Transformer Engine
`_extra_state` entries are dropped. Sizes come from the checkpoint's saved Megatron args when
present, else from tensor shapes and the options below.

The checkpoint is a full pickle (Megatron saves its argparse namespace), so it is loaded with
weights_only=False: convert only checkpoints you trust.

    memexp convert mamba2-megatron mamba2-8b-3t-4k/release/mp_rank_00/model_optim_rng.pt \\
        out/mamba2-8b --tokenizer mamba2-8b-3t-4k/mt_nlg_plus_multilingual_ja_zh_the_stack_frac_015_256k.model
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from memexp.backbones.mamba2.model import Mamba2Config
from memexp.convert.tokenizer_files import copy_tokenizer_files

RENAMES = [
    (r"^embedding\.word_embeddings\.weight$", "backbone.embedding.weight"),
    (r"^decoder\.final_norm\.weight$", "backbone.norm_f.weight"),
    (r"^output_layer\.weight$", "lm_head.weight"),
    (r"^decoder\.layers\.(\d+)\.mixer\.in_proj\.layer_norm_weight$", r"backbone.layers.\1.norm.weight"),
    (r"^decoder\.layers\.(\d+)\.", r"backbone.layers.\1."),
]


def megatron_state_dict(path: Path) -> tuple[dict[str, torch.Tensor], object]:
    """The model tensors (the 'model' entry, or 'model0' for virtual pipelines) and the
    saved Megatron args (None when absent)."""
    ckpt = torch.load(str(path), map_location="cpu", weights_only=False, mmap=True)
    sd = ckpt.get("model", ckpt.get("model0", ckpt)) if isinstance(ckpt, dict) else ckpt
    return {k: v for k, v in sd.items() if isinstance(v, torch.Tensor) and not k.endswith("_extra_state")}, \
        ckpt.get("args") if isinstance(ckpt, dict) else None


def rename(name: str) -> str:
    for pattern, repl in RENAMES:
        new, n = re.subn(pattern, repl, name)
        if n:
            return new
    raise ValueError(f"unexpected Megatron tensor {name!r}")


def mamba_ssm_config(sd: dict[str, torch.Tensor], args, opts) -> dict:
    """mamba_ssm's config.json from the Megatron args, tensor shapes and options."""
    vocab, d_model = sd["backbone.embedding.weight"].shape
    n_layer = 1 + max(int(m.group(1)) for k in sd if (m := re.match(r"backbone\.layers\.(\d+)\.", k)))
    nheads = sd["backbone.layers.0.mixer.A_log"].shape[0]
    d_inner = sd["backbone.layers.0.mixer.norm.weight"].shape[0]
    conv_dim, _, d_conv = sd["backbone.layers.0.mixer.conv1d.weight"].shape
    ngroups = getattr(args, "mamba_num_groups", None) or opts.ngroups
    gn = (conv_dim - d_inner) // 2
    if gn % ngroups:
        raise ValueError(f"2 * ngroups * d_state = {2 * gn} is not divisible by ngroups={ngroups}")
    return {
        "d_model": d_model,
        "d_intermediate": 0,
        "n_layer": n_layer,
        "vocab_size": vocab,
        "ssm_cfg": {"layer": "Mamba2", "d_state": gn // ngroups, "d_conv": d_conv, "expand": d_inner // d_model,
                    "headdim": d_inner // nheads, "ngroups": ngroups, "chunk_size": opts.chunk_size},
        "attn_layer_idx": [],
        "attn_cfg": {},
        "rms_norm": True,
        "residual_in_fp32": True,
        "fused_add_norm": True,
        "pad_vocab_size_multiple": 1,
        "tie_embeddings": "lm_head.weight" not in sd,
    }


def write_tokenizer(source: Path, out: Path) -> list[str]:
    """Copy a tokenizer directory's files, or install a SentencePiece model as tokenizer.model
    with a Llama-style config (no BOS/EOS added) and try to convert it to tokenizer.json."""
    if source.is_dir():
        return copy_tokenizer_files(source, out)
    shutil.copy(source, out / "tokenizer.model")
    config = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": False, "add_eos_token": False, "legacy": True,
              "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    try:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(out), local_files_only=True).save_pretrained(str(out))
    except Exception as e:  # transformers raises many kinds; the .model file still loads where sentencepiece exists
        print(f"note: tokenizer.json not written ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
              f"loading will need the sentencepiece package")
    return sorted(f.name for f in out.iterdir() if f.name.startswith(("tokenizer", "special_tokens")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memexp convert mamba2-megatron", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="model_optim_rng.pt (tensor-parallel rank 0 of 1)")
    parser.add_argument("out", type=Path, help="output directory")
    parser.add_argument("--tokenizer", type=Path, help="SentencePiece .model file or a tokenizer directory")
    parser.add_argument("--ngroups", type=int, default=8, help="B/C groups when the checkpoint has no Megatron args")
    parser.add_argument("--chunk-size", type=int, default=128, help="SSD chunk size recorded in ssm_cfg")
    parser.add_argument("--dtype", choices=["keep", "bfloat16", "float32"], default="keep")
    opts = parser.parse_args(argv)

    raw, args = megatron_state_dict(opts.checkpoint)
    sd = {rename(k): v for k, v in raw.items()}
    config = mamba_ssm_config(sd, args, opts)
    Mamba2Config.from_dict(config, where="converted config")
    opts.out.mkdir(parents=True, exist_ok=True)
    keep_fp32 = ("A_log", "dt_bias", ".D")
    tensors = {k: (v.to(getattr(torch, opts.dtype)) if opts.dtype != "keep" and v.is_floating_point()
                   and not k.endswith(keep_fp32) else v).contiguous() for k, v in sd.items()}
    save_file(tensors, str(opts.out / "model.safetensors"), metadata={"format": "pt"})
    (opts.out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tokenizer = write_tokenizer(opts.tokenizer, opts.out) if opts.tokenizer else []
    params = sum(t.numel() for t in tensors.values())
    print(f"{opts.out}: {len(tensors)} tensors, {params:,} parameters, {config['n_layer']} layers, "
          f"ngroups {config['ssm_cfg']['ngroups']}, tokenizer files: {', '.join(tokenizer) or 'none'}")
    return 0
