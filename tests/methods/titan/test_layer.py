"""The Titan layer on a tiny Llama: segmented attention, the gate, the value residual, exact
continuation, the training form, clones, nbytes and rescale."""

import pytest
import torch
from titan_helpers import SEGMENT, ids, tiny_llama, titan

from memexp.backbones.kv_cache import KVCache
from memexp.methods.titan.layer import TitanState

T = 5 * SEGMENT + 3  # five segments (2.5 test-time batches) and a partial one


def close(a, b, tol=1e-5):
    torch.testing.assert_close(a.float(), b.float(), rtol=tol, atol=tol)


@torch.no_grad()
def test_memory_off_and_one_segment_covering_the_input_is_llama():
    x = ids(T)[None]
    want = tiny_llama().train_forward(x)
    bb, _ = titan(memory=False, value_residual=False, segment_length=64, test_batch=64)
    close(bb.train_forward(x), want, 1e-6)
    close(bb.forward(bb.init_state(), x[0]), want[0, -1], 1e-6)


@torch.no_grad()
def test_segmented_attention_sees_only_the_queries_own_segment():
    # every layer segmented, no memory: a segment's logits are those of the segment read alone
    # (RoPE scores depend only on relative positions), whatever came before it
    x = ids(3 * SEGMENT)[None]
    bb, _ = titan(memory=False, value_residual=False)
    plain = tiny_llama()
    got = bb.train_forward(x)
    for s in range(3):
        piece = x[:, s * SEGMENT:(s + 1) * SEGMENT]
        close(got[:, s * SEGMENT:(s + 1) * SEGMENT], plain.train_forward(piece), 1e-4)


@torch.no_grad()
def test_only_the_converted_layers_are_segmented():
    # layer 0 Titan (no memory), layers 1-2 full attention: later tokens depend on earlier segments
    x = ids(2 * SEGMENT)[None]
    bb, _ = titan(layers=1, memory=False, value_residual=False)
    alone = tiny_llama().train_forward(x[:, SEGMENT:])
    assert (bb.train_forward(x)[:, SEGMENT:] - alone).abs().max() > 1e-3
    all_local, _ = titan(layers=1, memory=False, value_residual=False, local_later_layers=True)
    close(all_local.train_forward(x)[:, SEGMENT:], alone, 1e-4)


@torch.no_grad()
def test_the_memory_and_gate_are_zero_until_the_first_chunk_is_complete():
    x = ids(T)[None]
    with_memory, _ = titan(value_residual=False)
    without, _ = titan(memory=False, value_residual=False)
    a, b = with_memory.train_forward(x), without.train_forward(x)
    close(a[:, :SEGMENT], b[:, :SEGMENT], 1e-6)
    assert (a[:, SEGMENT:] - b[:, SEGMENT:]).abs().amax(dim=-1).min() > 1e-4  # every later token reads memory


def states_equal(s1, s2):
    for a, b in zip(s1.layers, s2.layers):
        assert a.kv.length == b.kv.length and a.position == b.position
        close(a.kv.k[:, :a.kv.length], b.kv.k[:, :b.kv.length], 1e-6)
        close(a.kv.v[:, :a.kv.length], b.kv.v[:, :b.kv.length], 1e-6)
        ma, mb = a.memory, b.memory
        for x, y in zip([ma.pending_k, ma.pending_v, *ma.fast, *ma.momentum, *ma.anchor],
                        [mb.pending_k, mb.pending_v, *mb.fast, *mb.momentum, *mb.anchor]):
            close(x, y, 1e-6)


CUTS = {
    "inside_segments": [3, 9, 12, 5, 14],
    "on_boundaries": [8, 8, 16, 11],
    "token_by_token_across_a_boundary": [6, 1, 1, 1, 1, 33],
    "token_by_token": [1] * T,
    "one_call": [T],
}


@pytest.mark.parametrize("cuts", CUTS.values(), ids=CUTS.keys())
@torch.no_grad()
def test_continuation_is_exact_and_the_training_form_equals_streaming(cuts):
    x = ids(T)
    bb, _ = titan()
    trained_form = bb.train_forward(x[None])[0]
    state, start = bb.init_state(), 0
    for n in cuts:
        close(bb.forward(state, x[start:start + n]), trained_form[start + n - 1])
        start += n
    whole = bb.init_state()
    bb.forward(whole, x)
    states_equal(state, whole)


@torch.no_grad()
def test_a_batch_of_sequences_is_each_sequence_alone():
    x = torch.stack([ids(T), ids(T, seed=4)])
    bb, _ = titan()
    both = bb.train_forward(x)
    for b in range(2):
        close(both[b], bb.train_forward(x[b:b + 1])[0])


@torch.no_grad()
def test_prefill_chunk_does_not_change_results():
    x = ids(T)
    small, _ = titan(prefill_chunk=5)
    big, _ = titan()
    close(small.forward(small.init_state(), x), big.forward(big.init_state(), x))


def test_training_forward_reaches_every_trainable_parameter_and_no_backbone_weight():
    bb, modules = titan()
    bb.train_forward(ids(3 * SEGMENT)[None]).float().logsumexp(-1).sum().backward()
    for name, p in modules.named_parameters():
        assert p.requires_grad and p.grad is not None and p.grad.abs().sum() > 0, name
    trainable = {id(p) for p in modules.parameters()}
    for name, p in bb.model.named_parameters():
        assert (id(p) in trainable) == p.requires_grad, name
        if id(p) not in trainable:
            assert p.grad is None, name


@torch.no_grad()
def test_clones_are_independent_both_ways():
    x, probe = ids(T), ids(7, seed=1)
    bb, _ = titan()
    state = bb.init_state()
    bb.forward(state, x[:-5])
    copy = state.clone()
    after_original = bb.forward(state, x[-5:])
    after_copy = bb.forward(copy, x[-5:])  # the original's advance left the copy untouched
    close(after_copy, after_original, 1e-6)
    bb.forward(copy, probe)  # and the copy's advance leaves the original untouched
    fresh = bb.init_state()
    bb.forward(fresh, x)
    states_equal(state, fresh)


@torch.no_grad()
def test_nbytes_counts_the_segment_kv_the_pending_chunk_and_three_weight_sets():
    bb, _ = titan()
    state = bb.init_state()
    bb.forward(state, ids(T))
    B, Hk, d, r = 1, 2, 16, T % SEGMENT
    kv = 2 * B * r * Hk * d * 4  # the partial segment's keys and values, fp32 compute
    pending = 2 * B * Hk * r * d * 4  # the memory's keys and values of the same tokens
    weights = 3 * 3 * B * Hk * d * d * 4  # fast weights, momentum, anchor: three matrices each
    assert state.nbytes() == 3 * (kv + pending + weights)
    assert isinstance(state.layers[0], TitanState) and isinstance(state.layers[0].kv, KVCache)


@torch.no_grad()
def test_rescale_pulls_the_fast_weights_toward_w0():
    x, probe = ids(T), ids(5, seed=2)
    bb, modules = titan()
    state = bb.init_state()
    bb.forward(state, x)
    before = state.clone()
    kept = state.clone()
    kept.scale_recurrent(1.0)
    close(bb.forward(kept, probe), bb.forward(state.clone(), probe), 1e-6)
    half = state.clone()
    half.scale_recurrent(0.5)
    state.scale_recurrent(0.0)
    for i, layer in enumerate(state.layers):
        slow = modules.layers[str(i)].memory.slow
        m, h, orig = layer.memory, half.layers[i].memory, before.layers[i].memory
        for f, a, w0, hf, of in zip(m.fast, m.anchor, slow, h.fast, orig.fast):
            assert torch.equal(f, w0.expand_as(f)) and torch.equal(a, w0.expand_as(a))
            close(hf, (w0 + of) / 2, 1e-6)
        assert all(not s.any() for s in m.momentum)
        n = layer.kv.length  # the segment's KV is not memory
        assert torch.equal(layer.kv.k[:, :n], before.layers[i].kv.k[:, :n])


@torch.no_grad()
def test_the_cache_keeps_mixed_values_and_the_memory_the_raw_ones():
    bb, modules = titan()
    modules.layers["1"].value_mix.weight.zero_()
    modules.layers["1"].value_mix.bias.fill_(40.0)  # mix = 1: layer 1 attends with layer 0's values
    raw = {}
    for i in (0, 1):
        bb.layers[i].self_attn.v_proj.register_forward_hook(lambda m, inp, out, i=i: raw.__setitem__(i, out))
    state = bb.init_state()
    bb.forward(state, ids(SEGMENT + 3))
    layer1 = state.layers[1]
    v0, v1 = (raw[i].view(1, -1, 2, 16)[:, -3:] for i in (0, 1))
    close(layer1.kv.v[:, :3], v0, 1e-6)
    close(layer1.memory.pending_v.transpose(1, 2), v1, 1e-6)
    assert (v0 - v1).abs().max() > 1e-3


@torch.no_grad()
def test_training_curves_read_each_layers_gate_rates_and_inner_loss():
    bb, modules = titan()
    bb.train_forward(ids(T)[None])
    assert modules.stats() == {}  # nothing is kept unless asked
    modules.record_stats()
    bb.train_forward(ids(T)[None])
    stats = modules.stats()
    assert set(stats) == {f"layer{i}/{n}" for i in range(3) for n in ("lambda", "theta", "eta", "alpha", "inner_loss")}
    assert all(0 < stats[f"layer{i}/{n}"] < 1 for i in range(3) for n in ("lambda", "theta", "eta", "alpha"))
    modules.record_stats(False)
    assert modules.stats() == {}
