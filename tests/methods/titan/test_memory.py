"""The neural memory: closed-form inner gradient against autograd, the soft clamp, identity
init, and the chunked form against a per-chunk reference written here with autograd."""

import math

import pytest
import torch
import torch.nn.functional as F

from memexp.methods.titan.memory import NeuralMemory, inner_grads, soft_clamp


@pytest.fixture(autouse=True)
def float64():
    """The checks compare closed forms with autograd to ~1e-12: everything here is fp64."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def random_weights(*lead, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.eye(d) + 0.3 * torch.randn(*lead, d, d, generator=g) for _ in range(3))


def m_by_hand(weights, x):
    w1, w2, w3 = weights
    return F.gelu(F.gelu(x @ w1) @ w2) @ w3


@pytest.mark.parametrize("lead", [(), (2, 3), (2, 3, 4)])
def test_closed_form_inner_gradient_equals_autograd(lead):
    d, C = 8, 5
    weights = random_weights(*lead, d=d)
    g = torch.Generator().manual_seed(1)
    keys, values = torch.randn(*lead, C, d, generator=g), torch.randn(*lead, C, d, generator=g)
    theta = torch.rand(*lead, C, generator=g)
    leaves = tuple(w.clone().requires_grad_() for w in weights)
    loss = (theta * ((m_by_hand(leaves, keys) - values) ** 2).mean(-1)).sum()
    expected = torch.autograd.grad(loss, leaves)
    for got, want in zip(inner_grads(weights, keys, values, theta), expected):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_anchor_broadcasts_over_the_chunks_of_a_batch():
    # one anchor [B, H, 1, d, d] against m chunks [B, H, m, C, d] = each chunk on its own
    anchor = random_weights(2, 3, 1)
    keys, values, theta = torch.randn(2, 3, 4, 5, 8), torch.randn(2, 3, 4, 5, 8), torch.rand(2, 3, 4, 5)
    together = inner_grads(anchor, keys, values, theta)
    for c in range(4):
        alone = inner_grads(tuple(a[:, :, 0] for a in anchor), keys[:, :, c], values[:, :, c], theta[:, :, c])
        for t, a in zip(together, alone):
            torch.testing.assert_close(t[:, :, c], a)


def test_soft_clamp_bounds_each_matrix_norm_by_tanh():
    g = torch.zeros(3, 4, 4)
    g[0, 0, 0] = 0.01  # tiny: kept (tanh x ~ x)
    g[1] = 5.0  # norm 20: cut to tanh(20) ~ 1
    out = soft_clamp(g)
    assert torch.equal(out[2], torch.zeros(4, 4))  # zero stays zero (no NaN)
    norms = out.flatten(1).norm(dim=1)
    torch.testing.assert_close(norms[:2], torch.tensor([math.tanh(0.01), math.tanh(20.0)]))
    torch.testing.assert_close(out[1] / norms[1], g[1] / 20.0)  # direction kept


def test_identity_init_makes_the_memory_nearly_the_identity_near_zero():
    mem = NeuralMemory(kv_heads=2, head_dim=8, chunk=4, test_batch=8, max_lr=1.0)
    eye = torch.eye(8).expand(2, 8, 8)
    assert torch.equal(mem.w1, eye) and torch.equal(mem.w2, eye) and torch.equal(mem.w3, 4 * eye)
    # GELU'(0) = 1/2, so the Jacobian at 0 is 4 * (1/2)^2 I = I; the error is second order in |x|
    x = 1e-4 * torch.randn(2, 5, 8)
    torch.testing.assert_close(m_by_hand(mem.slow, x), x, rtol=1e-3, atol=0)


def reference(mem, q, k, v, decay_target):
    """The memory written out chunk by chunk from the description (paper §3.2 and the authors' code):
    autograd for the gradient, one step per chunk, the anchor reset at each test-time batch start,
    each token read with the weights after the chunks before its own. q [B, T, H, d]; k, v [B, T, Hk, d]."""
    B, T, H, d = q.shape
    Hk, C, per_batch = mem.kv_heads, mem.chunk, mem.test_batch // mem.chunk
    s = d ** -0.25
    k, q = k * s, q * s
    slow = tuple(w.detach().expand(B, Hk, d, d) for w in mem.slow)
    W, S = slow, tuple(torch.zeros(B, Hk, d, d) for _ in range(3))
    weights_of_chunk = [W]
    for c in range(T // C):
        if c % per_batch == 0:
            anchor = W
        kc, vc = k[:, c * C:(c + 1) * C], v[:, c * C:(c + 1) * C]  # [B, C, Hk, d]
        flat = kc.reshape(B, C, Hk * d)
        with torch.no_grad():
            theta = mem.max_lr * torch.sigmoid(mem.theta(flat))  # [B, C, Hk]
            eta = torch.sigmoid(mem.eta(flat.mean(1)))  # [B, Hk]
            alpha = torch.sigmoid(mem.alpha(flat.mean(1)))
        leaves = tuple(a.clone().requires_grad_() for a in anchor)
        pred = m_by_hand(tuple(w for w in leaves), kc.transpose(1, 2))
        loss = (theta.transpose(1, 2) * ((pred - vc.transpose(1, 2)) ** 2).mean(-1)).sum()
        grads = torch.autograd.grad(loss, leaves)
        new_S, new_W = [], []
        for w, w0, sm, g in zip(W, slow, S, grads):
            n = g.flatten(2).norm(dim=-1)[..., None, None]
            g = g * torch.tanh(n) / n
            sm = eta[..., None, None] * sm - g
            target = w0 if decay_target == "slow_weights" else torch.zeros_like(w0)
            new_W.append((1 - alpha[..., None, None]) * w + alpha[..., None, None] * target + sm)
            new_S.append(sm)
        W, S = tuple(new_W), tuple(new_S)
        weights_of_chunk.append(W)
    out = torch.empty(B, T, H, d)
    for p in range(T):
        w = weights_of_chunk[p // C]
        for h in range(H):
            out[:, p, h] = m_by_hand(tuple(x[:, h // (H // Hk)] for x in w), q[:, p, h][:, None])[:, 0]
    return out, W, S


def memory_and_inputs(T, decay_target="slow_weights", seed=0):
    torch.manual_seed(seed)
    mem = NeuralMemory(kv_heads=2, head_dim=8, chunk=4, test_batch=8, max_lr=0.7, decay_target=decay_target)
    with torch.no_grad():  # move away from the identity so every term of the gradient matters
        for w in mem.slow:
            w.add_(0.2 * torch.randn_like(w))
    q, k, v = torch.randn(2, T, 4, 8), torch.randn(2, T, 2, 8), torch.randn(2, T, 2, 8)
    return mem, q, k, v


@pytest.mark.parametrize("decay_target", ["slow_weights", "zero"])
def test_one_call_equals_the_per_chunk_reference(decay_target):
    mem, q, k, v = memory_and_inputs(23, decay_target)  # 5 complete chunks (2.5 test batches) + 3 tokens
    state = mem.init_state(2, torch.device("cpu"))
    with torch.no_grad():
        got = mem(q, k, v, state, 0)
    want, W, S = reference(mem, q, k, v, decay_target)
    torch.testing.assert_close(got, want)
    for a, b in zip(state.fast, W):
        torch.testing.assert_close(a, b)
    for a, b in zip(state.momentum, S):
        torch.testing.assert_close(a, b)
    assert state.pending_k.shape == (2, 2, 3, 8)


@pytest.mark.parametrize("cuts", [[1] * 23, [3, 1, 4, 7, 8], [4, 4, 4, 11], [8, 15], [2, 9, 12]])
def test_any_split_of_the_stream_equals_one_call(cuts):
    mem, q, k, v = memory_and_inputs(23)
    one = mem.init_state(2, torch.device("cpu"))
    split = mem.init_state(2, torch.device("cpu"))
    with torch.no_grad():
        whole = mem(q, k, v, one, 0)
        parts, start = [], 0
        for n in cuts:
            parts.append(mem(q[:, start:start + n], k[:, start:start + n], v[:, start:start + n], split, start))
            start += n
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, rtol=1e-12, atol=1e-12)
    for a, b in zip(split.fast + split.momentum + split.anchor, one.fast + one.momentum + one.anchor):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_the_anchor_moves_only_at_test_batch_ends():
    mem, q, k, v = memory_and_inputs(12)
    state = mem.init_state(2, torch.device("cpu"))
    with torch.no_grad():
        mem(q[:, :4], k[:, :4], v[:, :4], state, 0)  # chunk 0 of batch 0: anchor still W0
        assert all(torch.equal(a, w.expand_as(a)) for a, w in zip(state.anchor, mem.slow))
        mem(q[:, 4:8], k[:, 4:8], v[:, 4:8], state, 4)  # chunk 1 ends batch 0: anchor = W after it
        assert all(torch.equal(a, f) for a, f in zip(state.anchor, state.fast))
        before = tuple(a.clone() for a in state.anchor)
        mem(q[:, 8:12], k[:, 8:12], v[:, 8:12], state, 8)
        assert all(torch.equal(a, b) for a, b in zip(state.anchor, before))
        assert not all(torch.equal(a, f) for a, f in zip(state.anchor, state.fast))


def test_gradients_reach_every_outer_parameter_through_the_updates():
    mem, q, k, v = memory_and_inputs(16)
    out = mem(q, k, v, mem.init_state(2, torch.device("cpu")), 0)
    out[:, 4:].pow(2).sum().backward()
    for name, p in mem.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_recorded_stats_are_the_rates_and_the_inner_loss_before_the_update():
    mem, q, k, v = memory_and_inputs(8)  # two chunks: one test-time batch, both graded at W0
    mem.stats = {}
    with torch.no_grad():
        mem(q, k, v, mem.init_state(2, torch.device("cpu")), 0)
        flat = (k * 8 ** -0.25).reshape(2, 2, 4, 16)  # [B, chunk, C, Hk d]
        theta = 0.7 * torch.sigmoid(mem.theta(flat))
        eta = torch.sigmoid(mem.eta(flat.mean(2)))
        w0 = tuple(w.expand(2, 2, 8, 8) for w in mem.slow)
        loss = (m_by_hand(w0, (k * 8 ** -0.25).transpose(1, 2)) - v.transpose(1, 2)).pow(2).mean()
    torch.testing.assert_close(mem.stats["theta"], theta.mean())
    torch.testing.assert_close(mem.stats["eta"], eta.mean())
    torch.testing.assert_close(mem.stats["inner_loss"], loss)
