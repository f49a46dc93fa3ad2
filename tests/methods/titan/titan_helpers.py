"""A tiny Llama (3 layers, 4 query heads of 16, 2 KV heads) and its Titan retrofit, for the Titan tests."""

import torch

from memexp.backbones import load_backbone
from memexp.methods.titan.config import TitanConfig
from memexp.methods.titan.retrofit import retrofit

TINY = {"hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": 258}
SEGMENT = 8


def tiny_llama(prefill_chunk=4096, seed=0):
    return load_backbone({"name": "tiny_llama_titan_test", "arch": "llama", "tokenizer": "byte", "seed": seed,
                          "prefill_chunk": prefill_chunk, "model": TINY})


def titan(prefill_chunk=4096, seed=0, module_seed=1, **fields):
    """A tiny Llama retrofitted with `fields` over W = 8, test batch 16, every layer a Titan layer, and
    trained-looking modules: every Titan parameter moved off its init (module_seed), so gates, mixers
    and rates all matter."""
    fields = {"layers": 3, "segment_length": SEGMENT, "test_batch": 2 * SEGMENT, **fields}
    bb = tiny_llama(prefill_chunk, seed)
    modules = retrofit(bb, TitanConfig(**fields))
    g = torch.Generator().manual_seed(module_seed)
    with torch.no_grad():
        for name, p in modules.named_parameters():
            scale = 0.05 if name.endswith(("gate.weight", "value_mix.weight")) else 0.1
            p.add_(scale * torch.randn(p.shape, generator=g))
            if name.endswith("value_mix.bias"):
                p.fill_(0.0)  # mix half way: the value residual visibly matters
    return bb, modules


def ids(n, seed=0):
    return torch.randint(0, 258, (n,), generator=torch.Generator().manual_seed(seed))


def authors_checkpoint(value_mix=True):
    """A state dict in the authors' naming (titan_llama.py), inside a training checkpoint, with the
    backbone's own tensors and the segmented attention's copies of them beside the Titan ones."""
    g = torch.Generator().manual_seed(3)
    sd = {"backbone.model.embed_tokens.weight": torch.randn(258, 64, generator=g)}
    for i in range(3):
        p = f"backbone.model.layers.{i}."
        sd[p + "self_attn.q_proj.weight"] = torch.randn(64, 64, generator=g)
        sd[p + "segmented_attn.to_q.weight"] = torch.randn(64, 64, generator=g)
        for j in range(3):
            sd[p + f"neural_memory.memory_model_parameters.{j}"] = torch.randn(2, 16, 16, generator=g)
        for name in ("to_adaptive_step", "to_momentum", "to_decay_factor"):
            sd[p + f"neural_memory.{name}.0.weight"] = torch.randn(2, 32, generator=g)
            sd[p + f"neural_memory.{name}.0.bias"] = torch.randn(2, generator=g)
        sd[p + "neural_memory.history_mix"] = torch.randn(4, 16, generator=g)
        sd[p + "neural_memory.history_mix_proj.weight"] = torch.randn(64, 64, generator=g)
        if value_mix and i > 0:
            sd[p + "segmented_attn.to_learned_v_mix.0.weight"] = torch.randn(2, 64, generator=g)
            sd[p + "segmented_attn.to_learned_v_mix.0.bias"] = torch.randn(2, generator=g)
    return {"model_state_dict": sd, "step": 200, "optimizer": {"lr": 1e-4}}
