"""method.memory_dtype: the Titan modules and the memory in fp32 (memexp's default) or in bf16, the
precision of the authors' runs (their TrainingConfig.model_dtype='bfloat16'; fp32 only in their
optimizer). A tiny checkpoint in the authors' naming and dtype is converted, then loaded in bf16."""

import pytest
import torch
from titan_helpers import SEGMENT, ids, tiny_llama, titan

from memexp.core.schema import ConfigError
from memexp.methods.titan.config import TitanConfig
from memexp.methods.titan.convert import NAMES, convert
from memexp.methods.titan.method import Titan

FIELDS = {"layers": 3, "segment_length": SEGMENT, "test_batch": 2 * SEGMENT}
AUTHORS = {mine: theirs for theirs, mine in NAMES.items()}


def authors_bf16_checkpoint(path):
    """Trained-looking modules written as the authors' training checkpoint: their tensor names,
    bf16 tensors (their model_dtype), the gate bias as their history_mix [H, d]."""
    _, modules = titan(module_seed=4)
    sd = {}
    for name, t in modules.state_dict().items():
        _, i, rest = name.split(".", 2)
        theirs = AUTHORS[rest]
        t = t.to(torch.bfloat16)
        sd[f"backbone.model.layers.{i}.{theirs}"] = t.view(4, 16) if theirs.endswith("history_mix") else t
    torch.save({"model_state_dict": sd, "step": 200}, path)
    return sd


def test_a_converted_bf16_checkpoint_loads_bit_exact_in_bf16(tmp_path):
    sd = authors_bf16_checkpoint(tmp_path / "latest_checkpoint.pt")
    folder = convert(tmp_path / "latest_checkpoint.pt", tmp_path / "modules", 3, segment_length=SEGMENT,
                     test_batch=2 * SEGMENT)
    method = Titan(TitanConfig(**FIELDS, memory_path=str(folder), memory_dtype="bfloat16"))
    backbone = tiny_llama()
    method.prepare(backbone)
    block = method.modules.layers["1"]
    assert all(p.dtype == torch.bfloat16 for p in method.modules.parameters())
    assert torch.equal(block.memory.w2, sd["backbone.model.layers.1.neural_memory.memory_model_parameters.1"])
    assert torch.equal(block.gate.bias.view(4, 16), sd["backbone.model.layers.1.neural_memory.history_mix"])
    assert torch.equal(block.value_mix.weight, sd["backbone.model.layers.1.segmented_attn.to_learned_v_mix.0.weight"])

    state = backbone.init_state()
    logits = backbone.forward(state, ids(3 * SEGMENT + 3))
    memory = state.layers[0].memory
    assert memory.fast[0].dtype == torch.bfloat16 and memory.pending_k.dtype == torch.bfloat16
    assert torch.isfinite(logits).all()

    # the same folder in fp32: the same values, another precision, close but not the same numbers
    fp32 = Titan(TitanConfig(**FIELDS, memory_path=str(folder)))
    other = tiny_llama()
    fp32.prepare(other)
    assert all(p.dtype == torch.float32 for p in fp32.modules.parameters())
    assert torch.equal(fp32.modules.layers["1"].memory.w2.to(torch.bfloat16), block.memory.w2)
    want = other.forward(other.init_state(), ids(3 * SEGMENT + 3))
    assert other.init_state().layers[0].memory.pending_k.dtype == torch.float32
    gap = (logits - want).abs().max().item()
    assert 0 < gap < 0.1 * want.abs().max().item()


def test_fp32_stays_the_default_and_the_file_does_not_depend_on_it(tmp_path):
    assert TitanConfig().memory_dtype == "float32"
    _, modules = titan(module_seed=2)
    modules.save(tmp_path / "m")
    _, bf16 = titan(memory_dtype="bfloat16", module_seed=3)
    bf16.load(tmp_path / "m")  # saved from fp32 modules: memory_dtype is not part of what must match
    assert torch.equal(bf16.layers["0"].memory.w1, modules.layers["0"].memory.w1.to(torch.bfloat16))


def test_wrong_values_are_one_line():
    with pytest.raises(ConfigError, match=r"^method\.memory_dtype='float16': allowed values are float32, bfloat16$"):
        TitanConfig(memory_dtype="float16")
    from memexp.cli.train import load_recipe

    with pytest.raises(ConfigError, match=r"^recipe\.method\.memory_dtype='bfloat16': training keeps"):
        load_recipe(["recipe=titan_llama", "method={layers: 4, segment_length: 512, test_batch: 1024, "
                                           "memory_dtype: bfloat16}"])
