"""The layer seam: a layer defined here (a running sum of its inputs) replaces a block of a tiny
Llama and a tiny GDN through `backbone.replace_layer`; the backbone's State then carries the new
layer's state through continuation, clone, nbytes, scale_recurrent and the training forward."""

from dataclasses import dataclass

import pytest
import torch
from torch import nn

from memexp.backbones import load_backbone
from memexp.backbones.stack import Layer, LayerContext, LayerState, StateSpec

N = 40


@dataclass
class SumState:
    total: torch.Tensor  # [B, D] fp32: the sum of every input the layer has read

    def clone(self) -> "SumState":
        return SumState(self.total.clone())

    def nbytes(self) -> int:
        return self.total.numel() * self.total.element_size()

    def scale_recurrent(self, lam: float) -> None:
        self.total.mul_(lam)


class RunningMean(Layer):
    """hidden + proj(mean of the inputs so far), the mean taken over the absolute positions."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim, bias=False)
        nn.init.normal_(self.proj.weight, std=0.5, generator=torch.Generator().manual_seed(0))

    def forward(self, x: torch.Tensor, state: SumState, ctx: LayerContext):
        sums = state.total[:, None] + x.float().cumsum(1)
        mean = sums / (ctx.positions.float()[None, :, None] + 1)
        return x + self.proj(mean.to(x.dtype)), SumState(sums[:, -1])

    def init_state(self, spec: StateSpec) -> SumState:
        return SumState(torch.zeros(spec.batch, self.proj.in_features, device=spec.device))


# (backbone, layer replaced): Titan-Llama replaces leading attention layers; in the GDN the last.
CASES = {"llama": ("tiny_llama_random", 0), "gdn": ("tiny_gdn_random", 1)}


def replaced(kind: str, prefill_chunk: int = 8):
    name, index = CASES[kind]
    bb = load_backbone(name)
    bb.prefill_chunk = prefill_chunk
    bb.replace_layer(index, RunningMean(bb.config.hidden_size))
    return bb, index


def ids(n=N, seed=0):
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed))


def assert_same_state(a, b):
    assert a.position == b.position and len(a.layers) == len(b.layers)
    for x, y in zip(a.layers, b.layers):
        assert type(x) is type(y)
        if isinstance(x, SumState):
            torch.testing.assert_close(x.total, y.total, atol=1e-5, rtol=1e-5)
    for xs, ys in ((a.recurrent, b.recurrent), (a.conv, b.conv)):
        for x, y in zip(xs, ys):
            assert (x is None) == (y is None)
            if x is not None:
                torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)
    for x, y in zip(a.kv, b.kv):
        if x is not None:
            assert x.length == y.length
            torch.testing.assert_close(x.k[:, :x.length], y.k[:, :y.length], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", list(CASES))
@pytest.mark.parametrize("cut", [1, 3, 7, 8, 9, 23, 39])
def test_continuation_is_exact_with_the_replaced_layer(kind, cut):
    bb, index = replaced(kind)
    x = ids()
    whole = bb.init_state()
    ref = bb.forward(whole, x)
    split = bb.init_state()
    bb.forward(split, x[:cut])
    torch.testing.assert_close(bb.forward(split, x[cut:]), ref, atol=1e-5, rtol=1e-5)
    assert isinstance(whole.layers[index], SumState)
    assert_same_state(split, whole)


@pytest.mark.parametrize("kind", list(CASES))
def test_the_state_holds_what_the_new_layer_read_and_changes_the_output(kind):
    bb, index = replaced(kind)
    seen = []
    hook = bb.layers[index].register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    state = bb.init_state()
    bb.forward(state, ids()[:13])
    logits = bb.forward(state, ids()[13:])
    hook.remove()
    assert len(seen) == 6  # chunks of 8: 13 = 8 + 5, then 27 = 8 + 8 + 8 + 3
    torch.testing.assert_close(state.layers[index].total, torch.cat(seen, dim=1).float().sum(1), atol=1e-4, rtol=1e-5)
    original = load_backbone(CASES[kind][0])
    assert (logits - original.forward(original.init_state(), ids())).abs().max() > 1e-3


@pytest.mark.parametrize("kind", list(CASES))
def test_clones_are_independent(kind):
    bb, index = replaced(kind)
    x = ids()
    base = bb.init_state()
    bb.forward(base, x[:20])
    saved = base.layers[index].total.clone()
    branch = base.clone()
    assert branch.layers[index].total.data_ptr() != base.layers[index].total.data_ptr()
    bb.forward(branch, x[20:25])
    assert torch.equal(base.layers[index].total, saved) and base.position == 20 and branch.position == 25
    after = bb.forward(base, x[20:])
    torch.testing.assert_close(after, bb.forward(bb.init_state(), x), atol=1e-5, rtol=1e-5)


def test_nbytes_counts_the_new_state_in_place_of_the_kv_cache():
    bb, _ = replaced("llama")
    state = bb.init_state()
    bb.forward(state, ids(17))
    # tiny_llama_random: 2 layers, 2 KV heads of 64 / 4 = 16 dims, fp32; layer 0 replaced by a 64-float sum
    assert state.nbytes() == 2 * 17 * 2 * 16 * 4 + 64 * 4


def test_nbytes_counts_the_new_state_in_place_of_the_recurrent_state():
    bb, _ = replaced("gdn")
    state = bb.init_state()
    bb.forward(state, ids(17))
    # tiny_gdn_random layer 0: state 2 heads x 32 x 64 fp32, conv window (2*64 + 128) x 3 fp32
    assert state.nbytes() == 2 * 32 * 64 * 4 + 256 * 3 * 4 + 64 * 4


@pytest.mark.parametrize("kind", list(CASES))
def test_scale_recurrent_scales_the_new_layer_and_the_recurrent_memories_only(kind):
    bb, index = replaced(kind)
    state = bb.init_state()
    bb.forward(state, ids(12))
    before = state.clone()
    state.scale_recurrent(0.5)
    torch.testing.assert_close(state.layers[index].total, 0.5 * before.layers[index].total)
    for now, then in zip(state.recurrent, before.recurrent):
        if now is not None:
            torch.testing.assert_close(now, 0.5 * then)
    for now, then in zip(state.conv + state.kv, before.conv + before.kv):
        if isinstance(now, torch.Tensor):
            assert torch.equal(now, then)
        elif now is not None:
            assert torch.equal(now.k[:, :now.length], then.k[:, :then.length])


def test_replaced_recurrent_layer_leaves_the_channels_and_the_observer():
    bb, index = replaced("gdn")
    assert {ch.layer for ch in bb.channels} == {0}
    calls = []
    bb.forward(bb.init_state(), ids(20), observer=lambda layer, start, k, q: calls.append((layer, start)))
    assert calls == [(0, 0), (0, 8), (0, 16)]
    assert isinstance(bb.init_state().layers[index], LayerState)


@pytest.mark.parametrize("kind", list(CASES))
def test_training_forward_runs_the_replaced_layer(kind):
    bb, index = replaced(kind)
    x = torch.stack([ids(), ids(seed=1)])
    logits = bb.train_forward(x)
    for row in range(2):
        for t in (4, 15, 39):
            torch.testing.assert_close(logits[row, t], bb.forward(bb.init_state(), x[row, :t + 1]), atol=1e-5, rtol=1e-5)
    logits.logsumexp(-1).mean().backward()
    assert bb.layers[index].proj.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("kind", list(CASES))
def test_the_new_layer_takes_the_replaced_layers_place_in_the_state_dict(kind):
    name, index = CASES[kind]
    before = set(load_backbone(name).model.state_dict())
    bb, _ = replaced(kind)
    after = set(bb.model.state_dict())
    prefix = next(k for k in after if k.endswith(f".{index}.proj.weight")).removesuffix("proj.weight")
    assert after - before == {prefix + "proj.weight"}
    assert before - after == {k for k in before if k.startswith(prefix)} != set()
