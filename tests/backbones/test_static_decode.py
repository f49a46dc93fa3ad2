"""Static-shape decoding (memexp.backbones.static_decode) against the eager decode, on every
registered architecture's tiny random config (fp32, CPU): the same greedy ids and logits, step by
step, from a state that read a context across prefill chunks, and Titan-Llama's layers (segments
in a ring, the memory's update between steps). Capturing it in a CUDA graph is the GPU check's
part (scripts/check/gpu_measure.py titan)."""

from __future__ import annotations

import pytest
import torch
from test_contract import BY_NAME

from memexp.backbones import load_backbone
from memexp.backbones.kv_cache import KVCache, StaticKVCache
from memexp.backbones.static_decode import StaticDecoder
from memexp.core.schema import BackboneConfig


@pytest.mark.parametrize("arch", sorted(BY_NAME))
def test_static_decode_matches_the_eager_decode(arch):
    backbone = load_backbone(BY_NAME[arch].config)
    backbone.prefill_chunk = 7
    ids = torch.randint(1, 200, (23,), generator=torch.Generator().manual_seed(0)).tolist()
    state = backbone.init_state()
    first = int(backbone.forward(state, ids).argmax())
    eager_state, n = state.clone(), 9
    eager_ids, eager_logits, token = [], [], first
    for _ in range(n):
        logits = backbone.forward(eager_state, [token])
        token = int(logits.argmax())
        eager_ids.append(token)
        eager_logits.append(logits)
    decoder = StaticDecoder(backbone, state, n)
    decoder.feed(first)
    for i in range(n):
        logits = decoder.step()
        torch.testing.assert_close(logits, eager_logits[i], rtol=1e-5, atol=1e-5, msg=f"{arch}: step {i}")
    assert decoder.ids.tolist() == eager_ids
    assert state.position == len(ids)  # the source state is not advanced
    with pytest.raises(RuntimeError, match="all decoded"):
        decoder.step()


def test_generate_chains_the_argmax_on_the_device():
    backbone = load_backbone(BY_NAME["llama"].config)
    state = backbone.init_state()
    first = int(backbone.forward(state, [3, 4, 5, 6]).argmax())
    expected = backbone.generate(state.clone(), [first], 5, stop=[])
    decoder = StaticDecoder(backbone, state, 5)
    decoder.feed(first)
    assert decoder.generate(5) == expected


def test_static_cache_keeps_its_buffers_and_masks_by_position():
    cache = KVCache.empty(1, 2, 4, torch.float32, torch.device("cpu"))
    cache.append(torch.ones(1, 3, 2, 4), torch.ones(1, 3, 2, 4))
    position = torch.tensor([3])
    static = StaticKVCache.from_cache(cache, 8, position)
    k_ptr = static.k.data_ptr()
    keys, _ = static.append(torch.full((1, 1, 2, 4), 2.0), torch.zeros(1, 1, 2, 4))
    assert keys.data_ptr() == k_ptr and keys.shape[1] == 8
    assert keys[0, :, 0, 0].tolist() == [1, 1, 1, 2, 0, 0, 0, 0]
    assert static.attention_mask().tolist() == [[True] * 4 + [False] * 4]
    with pytest.raises(ValueError, match="one token per call"):
        static.append(torch.ones(1, 2, 2, 4), torch.ones(1, 2, 2, 4))
    windowed = KVCache.empty(1, 2, 4, torch.float32, torch.device("cpu"), window=4)
    with pytest.raises(ValueError, match="window=4"):
        StaticKVCache.from_cache(windowed, 8, position)


def _eager_then_static(backbone, ids, n):
    """The eager greedy logits of n steps after `ids`, and the StaticDecoder's, from one state."""
    state = backbone.init_state()
    first = int(backbone.forward(state, ids).argmax())
    eager_state, eager, token = state.clone(), [], first
    for _ in range(n):
        logits = backbone.forward(eager_state, [token])
        token = int(logits.argmax())
        eager.append(logits)
    decoder = StaticDecoder(backbone, state, n)
    decoder.feed(first)
    return eager, [decoder.step().clone() for _ in range(n)]


@pytest.mark.parametrize("memory", [True, False])
def test_titan_layers_decode_in_static_shapes(memory):
    """Titan-Llama with two Titan layers (the second mixing values), segments of 8 tokens and
    test-time batches of 16: a context of 13 tokens, then 21 steps cross three segment and chunk
    ends (their memory updates run between steps) and a test-time batch end. `memory=False` is the
    segmented-attention control."""
    from memexp.methods.titan.config import TitanConfig
    from memexp.methods.titan.method import Titan

    backbone = load_backbone(BackboneConfig(name="t", arch="llama", tokenizer="byte", model={
        "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": 258}))
    Titan(TitanConfig(layers=2, segment_length=8, test_batch=16, memory=memory)).prepare(backbone)
    eager, static = _eager_then_static(backbone, list(range(3, 16)), 21)
    for i, (a, b) in enumerate(zip(eager, static)):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=f"step {i}")


def test_a_layer_without_a_static_form_is_refused_in_one_line():
    from memexp.backbones.stack import Layer

    class Opaque(Layer):
        def forward(self, x, state, ctx):
            return x, state

        def init_state(self, spec):
            return [spec.batch]

    backbone = load_backbone(BY_NAME["llama"].config)
    backbone.layers[1] = Opaque()
    state = backbone.init_state()
    with pytest.raises(ValueError, match=r"layer 1's state is a list, which its layer cannot give in fixed tensors"):
        StaticDecoder(backbone, state, 4)
