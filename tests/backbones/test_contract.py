"""The native memory interface, checked the same way for every registered architecture on its
tiny random config (fp32, CPU): exact continuation at awkward cuts, clone independence,
rescale, observer features against the layer's own values, state bytes, greedy generation,
and the training forward against the inference forward.

Adding an architecture: its package, one conf/backbone/tiny_<arch>_random.yaml, and one line
in ARCHITECTURES (a recurrent one also names how its observer features are recomputed).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import contract_checks as cc
import pytest
import torch
from backbone_checks import check_method_end_to_end, feed, pieces_of

from memexp.backbones import backbone_config, load_backbone
from memexp.core.registry import ARCHS

PREFILL_CHUNK = 5  # small, so that short sequences cross prefill chunks and cuts fall on their edges


@dataclass(frozen=True)
class Arch:
    arch: str
    config: str  # conf/backbone/<config>.yaml
    memory: tuple[str, ...] = ()  # state attributes that hold recurrent memory (scale_recurrent scales them)
    conv: str | None = None  # the model config field holding the short-conv width
    features: cc.Features | None = None  # how the observer's keys and queries are recomputed


ARCHITECTURES = [
    Arch("gdn", "tiny_gdn_random", memory=("recurrent",), conv="conv_size", features=cc.GDN),
    Arch("gdn2", "tiny_gdn2_random", memory=("recurrent",), conv="conv_size", features=cc.GDN2),
    Arch("mamba2", "tiny_mamba2_random", memory=("recurrent",), conv="conv_kernel", features=cc.MAMBA2),
    Arch("qwen35", "tiny_qwen35_random", memory=("recurrent",), conv="linear_conv_kernel_dim", features=cc.QWEN35),
    Arch("llama", "tiny_llama_random"),
]
BY_NAME = {a.arch: a for a in ARCHITECTURES}
NAMES = list(BY_NAME)
RECURRENT = [a.arch for a in ARCHITECTURES if a.memory]
ATTENTION_ONLY = [a.arch for a in ARCHITECTURES if not a.memory]


def test_every_registered_architecture_is_in_the_suite():
    missing = sorted(set(ARCHS.names()) - set(BY_NAME))
    assert not missing, f"add {missing} to ARCHITECTURES in {__file__}"
    assert sorted(BY_NAME) == sorted(ARCHS.names()), "ARCHITECTURES names an unregistered arch"
    for a in ARCHITECTURES:
        assert backbone_config(a.config).arch == a.arch, f"{a.config}.yaml is not arch={a.arch}"
        assert bool(a.memory) == (a.features is not None), f"{a.arch}: a recurrent arch names its features"


@lru_cache(maxsize=None)
def _load(arch: str):
    return load_backbone(BY_NAME[arch].config)


@pytest.fixture
def bb(arch):
    backbone = _load(arch)
    backbone.prefill_chunk = PREFILL_CHUNK
    assert backbone.dtype == torch.float32 and backbone.device.type == "cpu"
    return backbone


def archs(names):
    return pytest.mark.parametrize("arch", names)


@archs(NAMES)
def test_declared_capabilities_are_what_the_backbone_offers(arch, bb):
    """Validation trusts the registry's capability flags, so each flag is checked against the
    loaded backbone: channels exist iff recurrent_channels; layer_replacement means
    `replace_layer` accepts a layer of the stack (the same module put back changes nothing);
    adapters means the projections are plain nn.Linear modules adapters can hook."""
    meta = ARCHS.get(arch).meta
    assert meta.get("recurrent_channels", False) == bool(bb.channels)
    assert meta.get("recurrent_channels", False) == bool(BY_NAME[arch].memory)
    if meta.get("layer_replacement"):
        x = ids(9)
        before = bb.forward(bb.init_state(), x)
        bb.replace_layer(0, bb.layers[0])
        assert torch.equal(bb.forward(bb.init_state(), x), before)
    if meta.get("adapters"):
        assert any(isinstance(m, torch.nn.Linear) for m in bb.layers[0].modules())
    # softmax_attention: some layer attends through `self_attn` (InfLLM replaces those layers)
    assert meta.get("softmax_attention", False) == any(hasattr(layer, "self_attn") for layer in bb.layers)


def ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed))


def close(a, b, what=""):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=lambda m: f"{what}: {m}")


# ---- continuation ------------------------------------------------------------------------------

N = 24  # tokens read in every continuation case
# first pieces (the rest of the N tokens follows as one piece); W is the short-conv width
CUTS = {
    "1": lambda W: [1],
    "W-1": lambda W: [W - 1],  # the window is not yet full
    "W": lambda W: [W],
    "window-pieces": lambda W: [W - 1, 1, W - 1, 1],  # successive pieces shorter than the window
    "chunk-edge": lambda W: [PREFILL_CHUNK, 2 * PREFILL_CHUNK],  # cuts on prefill-chunk boundaries
    "inside-chunk": lambda W: [3, PREFILL_CHUNK + 4],  # cuts inside chunks; a piece spans a boundary
    "token-by-token": lambda W: [1] * (N - 1),
}
WINDOW_CUTS = ("W-1", "W", "window-pieces")
CONTINUATION = [pytest.param(a.arch, cut, id=f"{a.arch}-{cut}") for a in ARCHITECTURES for cut in CUTS
                if a.conv or cut not in WINDOW_CUTS]


@pytest.mark.parametrize("arch, cut", CONTINUATION)
def test_continuation_is_exact(arch, bb, cut):
    """forward(A); forward(B) == forward(A + B): the logits after every piece and every tensor
    and counter of the state at the end."""
    conv = BY_NAME[arch].conv
    width = getattr(bb.config, conv) if conv else None  # only the window cuts use it
    if conv:
        assert width >= 3, f"{conv}={width}: the window cuts need a window of at least 2 tokens"
    x = ids(N)
    firsts = CUTS[cut](width)
    split, end = bb.init_state(), 0
    for piece in pieces_of(x, firsts + [N - sum(firsts)]):
        assert piece.numel()
        logits = bb.forward(split, piece)
        end += piece.numel()
        close(logits, feed(bb, [x[:end]])[0], f"logits after {end} tokens")
    _, whole = feed(bb, [x])
    assert whole.position == split.position == N
    cc.assert_same(split, cc.snapshot(whole), atol=1e-5, what="split state")


@archs(NAMES)
def test_prefill_chunk_does_not_change_results(arch, bb):
    """One long chunk (past the recurrences' own 64-token chunks) equals chunks of 5 tokens."""
    x = ids(70, seed=1)
    short_logits, short = feed(bb, [x])
    bb.prefill_chunk = 2048
    long_logits, long = feed(bb, [x])
    close(short_logits, long_logits, "logits")
    cc.assert_same(short, cc.snapshot(long), atol=1e-5, what="chunked state")


# ---- clone -------------------------------------------------------------------------------------

@archs(NAMES)
def test_clone_is_independent_both_ways(arch, bb):
    """A clone starts equal to its original and shares no storage; advancing or rescaling either
    leaves every tensor and counter of the other as it was; the original then continues as one
    uninterrupted read."""
    x = ids(30)
    _, base = feed(bb, [x[:12]])
    before = cc.snapshot(base)
    branch = base.clone()
    cc.assert_same(branch, before, what="clone")
    ours = {p: t.data_ptr() for p, t in cc.tensors(base) if t.numel()}
    shared = [cc.format_path(p) for p, t in cc.tensors(branch) if t.numel() and t.data_ptr() in ours.values()]
    assert not shared, f"clone shares storage at {shared}"
    feed(bb, [x[12:19], *x[19:22].split(1)], branch)
    branch.scale_recurrent(0.5)
    cc.assert_same(base, before, what="original after advancing the clone")
    kept = branch.clone()
    branch_before = cc.snapshot(kept)
    logits, _ = feed(bb, [x[12:20], *x[20:].split(1)], base)
    base.scale_recurrent(0.5)
    cc.assert_same(kept, branch_before, what="clone after advancing the original")
    close(logits, feed(bb, [x])[0], "original continued after its clone advanced")


# ---- rescale -----------------------------------------------------------------------------------

@archs(RECURRENT)
def test_rescale_zero_equals_memory_zeroed_by_hand(arch, bb):
    """scale_recurrent(0) zeroes exactly the recurrent memory: the state equals one whose memory
    tensors were zeroed directly (conv windows, KV caches, position kept), and so does what
    follows; 0.5 halves the memory alone; 1 changes nothing."""
    x = ids(18)
    _, state = feed(bb, [x[:12]])
    memory = cc.memory_tensors(state, BY_NAME[arch].memory)
    paths = {p for p, _ in memory}
    layer_of = [next(part for part in p if isinstance(part, int)) for p in paths]
    assert sorted(layer_of) == sorted({c.layer for c in bb.channels}), \
        f"one memory tensor per channel layer expected; {BY_NAME[arch].memory} found {sorted(map(cc.format_path, paths))}"
    assert all(t.any() for _, t in memory), "the memory should hold something after 12 tokens"
    others = [t for p, t in cc.tensors(state) if p not in paths]
    assert others and any(t.any() for t in others), "conv windows / KV caches should hold the context"
    by_hand = state.clone()
    for _, t in cc.memory_tensors(by_hand, BY_NAME[arch].memory):
        t.zero_()
    before = cc.snapshot(state)

    state.scale_recurrent(1.0)
    cc.assert_same(state, before, what="after scale_recurrent(1)")
    halved = state.clone()
    halved.scale_recurrent(0.5)
    expected = {p: v * 0.5 if p in paths else v for p, v in before.items()}
    cc.assert_same(halved, expected, what="after scale_recurrent(0.5)")
    state.scale_recurrent(0.0)
    cc.assert_same(state, cc.snapshot(by_hand), what="after scale_recurrent(0)")
    close(feed(bb, [x[12:]], state)[0], feed(bb, [x[12:]], by_hand)[0], "continuation after the reset")
    cc.assert_same(state, cc.snapshot(by_hand), atol=1e-6, what="state continued after the reset")


@archs(ATTENTION_ONLY)
def test_rescale_changes_nothing_without_recurrent_memory(arch, bb):
    _, state = feed(bb, [ids(12)])
    before = cc.snapshot(state)
    for lam in (0.0, 0.5, 1.0):
        state.scale_recurrent(lam)
        cc.assert_same(state, before, what=f"after scale_recurrent({lam})")


# ---- observer ----------------------------------------------------------------------------------

@archs(RECURRENT)
def test_observer_gets_the_layers_own_keys_and_queries(arch, bb):
    """Each recurrent layer, chunk by chunk in layer order, hands the observer keys and queries
    equal to its projections run through a whole-sequence causal conv, activation and L2 norm
    (recomputed here from hooked outputs), with `start` counted inside the forward call and
    heads in `channels` order; observing changes no result."""
    x = ids(17, seed=2)
    layers = sorted({c.layer for c in bb.channels})
    calls = []
    unobserved, _ = feed(bb, [x[:3], x[3:]])
    with cc.recorded_features(bb, BY_NAME[arch].features, layers) as reference:
        _, state = feed(bb, [x[:3]])
        logits = bb.forward(state, x[3:], observer=lambda layer, start, k, q: calls.append((layer, start, k.clone(),
                                                                                              q.clone())))
        refs = {i: reference(i) for i in layers}
    assert torch.equal(logits, unobserved), "the observer changed the logits"
    starts = range(0, 14, PREFILL_CHUNK)
    assert [(layer, start) for layer, start, _, _ in calls] == [(layer, s) for s in starts for layer in layers]
    assert all(k.shape[0] == q.shape[0] == min(PREFILL_CHUNK, 14 - s) for _, s, k, q in calls)
    assert all(k.dtype == q.dtype == bb.dtype for _, _, k, q in calls)
    first_chunk = [(layer, h, k.shape[-1]) for layer, s, k, q in calls if s == 0 for h in range(k.shape[1])]
    assert first_chunk == [(c.layer, c.head, c.d_k) for c in bb.channels]
    for i in layers:
        keys = torch.cat([k for layer, _, k, _ in calls if layer == i])
        queries = torch.cat([q for layer, _, _, q in calls if layer == i])
        ref_keys, ref_queries = (t[3:] for t in refs[i])
        close(keys, ref_keys, f"layer {i} keys")
        close(queries, ref_queries, f"layer {i} queries")
        assert (keys.norm(dim=-1) <= 1 + 1e-5).all() and (keys.norm(dim=-1) > 0.5).all()


@archs(ATTENTION_ONLY)
def test_observer_is_never_called_without_channels(arch, bb):
    assert bb.channels == []
    calls = []
    x = ids(12)
    _, state = feed(bb, [x[:3]])
    logits = bb.forward(state, x[3:], observer=lambda *a: calls.append(a))
    assert calls == []
    torch.testing.assert_close(logits, feed(bb, [x])[0], atol=1e-5, rtol=1e-5)


# ---- state bytes -------------------------------------------------------------------------------

@archs(NAMES)
def test_nbytes_counts_every_tensor_of_the_state(arch, bb):
    state = bb.init_state()
    assert state.nbytes() == cc.walked_nbytes(state)
    for piece in (ids(7), ids(1), ids(9)):
        bb.forward(state, piece)
        assert state.nbytes() == cc.walked_nbytes(state)
        assert state.clone().nbytes() == cc.walked_nbytes(state)


# The analytical state bytes the cost report uses are pinned to real states in
# tests/costs/test_arch_costs.py.


# ---- generate ----------------------------------------------------------------------------------

def greedy_by_hand(bb, state, prompt, steps, stop=(), min_new_tokens=0):
    """Greedy decoding written out: forward, bar the stop ids for the first `min_new_tokens`
    steps, argmax, stop after a stop id, feed the token back."""
    logits, out = bb.forward(state, prompt), []
    for i in range(steps):
        if i < min_new_tokens:
            logits = logits.clone()
            logits[list(stop)] = float("-inf")
        out.append(int(logits.argmax()))
        if out[-1] in stop or i == steps - 1:
            return out
        logits = bb.forward(state, [out[-1]])
    return out


@archs(NAMES)
def test_generate_is_greedy_from_the_state(arch, bb):
    """Generation continues the given state (positions follow the context), equals argmax
    stepping by hand, and leaves the state advanced over every generated token but the last."""
    _, state = feed(bb, [ids(13)])
    prompt = ids(4, seed=5)
    by_hand = state.clone()
    expected = greedy_by_hand(bb, by_hand, prompt, 7)
    assert bb.generate(state, prompt, max_new_tokens=7, stop=[]) == expected
    seq = torch.cat([ids(13), prompt]).tolist()
    for token in expected:  # the same tokens from one fresh read of everything before each
        assert int(feed(bb, [seq])[0].argmax()) == token
        seq.append(token)
    assert state.position == 13 + 4 + 6
    cc.assert_same(state, cc.snapshot(by_hand), what="state after generate")


@archs(NAMES)
def test_generate_honours_stop_ids_and_min_new_tokens(arch, bb):
    _, state = feed(bb, [ids(13)])
    prompt = ids(4, seed=5)
    free = greedy_by_hand(bb, state.clone(), prompt, 6)
    stop = [free[2]]
    cut = free[:free.index(stop[0]) + 1]
    assert bb.generate(state.clone(), prompt, max_new_tokens=6, stop=stop) == cut
    stop = [free[0], free[1]]  # greedy's first two tokens: barring them changes the answer
    expected = greedy_by_hand(bb, state.clone(), prompt, 6, stop=stop, min_new_tokens=2)
    got = bb.generate(state.clone(), prompt, max_new_tokens=6, stop=stop, min_new_tokens=2)
    assert got == expected and not set(got[:2]) & set(stop) and len(got) >= 3
    default = bb.tokenizer.stop_ids
    assert bb.generate(state.clone(), prompt, max_new_tokens=6) == \
        greedy_by_hand(bb, state.clone(), prompt, 6, stop=default)


# ---- training forward --------------------------------------------------------------------------

@archs(NAMES)
def test_training_forward_equals_the_inference_forward(arch, bb):
    """train_forward(ids [B, T]) -> logits [B, T, vocab] from the zero state, grad-enabled: at
    every position t it equals forward(fresh state, ids[:t + 1]), and every weight gets a
    finite gradient."""
    x = torch.stack([ids(70, seed=1), ids(70, seed=2)])
    logits = bb.train_forward(x)
    vocab = bb.forward(bb.init_state(), x[0, :1]).numel()
    assert logits.shape == (2, 70, vocab) and logits.requires_grad
    for row in range(2):
        for t in (0, 1, 4, 5, 9, 63, 64, 69):  # prefill-chunk edges; the recurrences' 64-token chunks
            close(logits[row, t].detach().float(), bb.forward(bb.init_state(), x[row, :t + 1]), f"row {row}, t={t}")
    try:
        logits.float().square().mean().backward()
        missing = [n for n, p in bb.model.named_parameters()
                   if p.grad is None or not torch.isfinite(p.grad).all() or not p.grad.any()]
        assert not missing, f"no finite non-zero gradient for {missing}"
    finally:
        bb.model.zero_grad(set_to_none=True)


# ---- methods -----------------------------------------------------------------------------------

METHODS = [pytest.param(a, m, id=f"{a}-{m}") for a in NAMES for m in ("plain", "notebank", "notebank-reset")
           if m == "plain" or a in RECURRENT]


@pytest.mark.parametrize("arch, method", METHODS)
def test_methods_run_end_to_end(arch, bb, method):
    """Plain, and NoteBank (with and without the clean-start reset before replay), read a context
    and answer from a copy of its state."""
    notebank = {"rescale": 0.0} if method == "notebank-reset" else {}
    memory, context = check_method_end_to_end(bb, method.split("-")[0], **notebank)
    assert memory.state.position == len(context)


@archs(ATTENTION_ONLY)
def test_notebank_refuses_a_backbone_without_channels(arch, bb):
    from memexp.methods import build_method
    from memexp.methods.notebank.config import NoteBankConfig

    with pytest.raises(ValueError, match="channel"):
        build_method(NoteBankConfig(address_dim=4)).read(bb, bb.tokenizer.encode("Fact: the code is 31.", add_bos=True))
