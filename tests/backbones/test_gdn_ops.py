"""memexp's reference ops for Gated DeltaNet: the two recurrence forms agree with each
other and with FLA's naive references; conv, norms and gate match their formulas."""

import pytest
import torch
import torch.nn.functional as F

from memexp.backbones.gdn_gate import gdn_gate
from memexp.backbones.norms import gated_rms_norm, rms_norm
from memexp.kernels.gated_delta_rule import chunk_gated_delta_rule_ref, gated_delta_rule, recurrent_gated_delta_rule_ref
from memexp.kernels.l2norm import l2_norm
from memexp.kernels.short_conv import short_conv


def _inputs(T, B=2, H=2, G=2, K=16, V=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = l2_norm(torch.randn(B, T, H, K, generator=gen))
    k = l2_norm(torch.randn(B, T, H, K, generator=gen))
    v = torch.randn(B, T, H * G, V, generator=gen)
    g = -torch.rand(B, T, H * G, generator=gen) * 0.5
    beta = torch.rand(B, T, H * G, generator=gen)
    h0 = torch.randn(B, H * G, K, V, generator=gen)
    return q, k, v, g, beta, h0


@pytest.mark.parametrize("T", [1, 63, 64, 65, 200])
def test_chunk_and_recurrent_forms_agree_with_grouped_values_and_initial_state(T):
    q, k, v, g, beta, h0 = _inputs(T)
    o_r, s_r = recurrent_gated_delta_rule_ref(q, k, v, g, beta, initial_state=h0)
    o_c, s_c = chunk_gated_delta_rule_ref(q, k, v, g, beta, initial_state=h0)
    assert o_r.shape == (2, T, 4, 8) and s_r.shape == (2, 4, 16, 8)
    torch.testing.assert_close(o_c, o_r, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(s_c, s_r, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("T", [1, 63, 65, 200])
def test_reference_forms_match_fla_naive_ops(T):
    from fla.ops.gated_delta_rule import naive_chunk_gated_delta_rule, naive_recurrent_gated_delta_rule

    q, k, v, g, beta, h0 = _inputs(T)
    # FLA's naive ops have no grouped values: give every value head its own q/k copy
    qg, kg = q.repeat_interleave(2, dim=2), k.repeat_interleave(2, dim=2)
    o_fr, s_fr = naive_recurrent_gated_delta_rule(qg, kg, v, beta, g, initial_state=h0, output_final_state=True)
    o_fc, s_fc = naive_chunk_gated_delta_rule(qg, kg, v, g, beta, initial_state=h0, output_final_state=True)
    o_r, s_r = recurrent_gated_delta_rule_ref(q, k, v, g, beta, initial_state=h0)
    o_c, s_c = chunk_gated_delta_rule_ref(q, k, v, g, beta, initial_state=h0)
    torch.testing.assert_close(o_r, o_fr, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s_r, s_fr, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(o_c, o_fc, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(s_c, s_fc, atol=2e-5, rtol=1e-5)


def test_splitting_a_sequence_through_the_final_state_is_exact():
    q, k, v, g, beta, h0 = _inputs(150)
    o, s = gated_delta_rule(q, k, v, g, beta, initial_state=h0)
    cut = 70
    o1, s1 = gated_delta_rule(q[:, :cut], k[:, :cut], v[:, :cut], g[:, :cut], beta[:, :cut], initial_state=h0)
    o2, s2 = gated_delta_rule(q[:, cut:], k[:, cut:], v[:, cut:], g[:, cut:], beta[:, cut:], initial_state=s1)
    torch.testing.assert_close(torch.cat([o1, o2], dim=1), o, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(s2, s, atol=2e-5, rtol=1e-5)


def test_in_op_l2_norm_and_default_scale():
    q, k, v, g, beta, h0 = _inputs(5)
    raw_q, raw_k = q * 3.0, k * 0.5
    o_in, s_in = gated_delta_rule(raw_q, raw_k, v, g, beta, initial_state=h0, use_qk_l2norm=True)
    o, s = gated_delta_rule(l2_norm(raw_q), l2_norm(raw_k), v, g, beta, initial_state=h0, scale=16 ** -0.5)
    torch.testing.assert_close(o_in, o)
    torch.testing.assert_close(s_in, s)


def test_one_step_matches_the_delta_rule_by_hand():
    q, k, v, g, beta, h0 = _inputs(1, B=1, H=1, G=1, K=4, V=3)
    o, s = recurrent_gated_delta_rule_ref(q, k, v, g, beta, scale=0.5, initial_state=h0)
    S = h0[0, 0] * g[0, 0, 0].exp()
    kk, vv = k[0, 0, 0], v[0, 0, 0]
    u = beta[0, 0, 0] * (vv - S.T @ kk)
    S = S + torch.outer(kk, u)
    torch.testing.assert_close(s[0, 0], S)
    torch.testing.assert_close(o[0, 0, 0], S.T @ (0.5 * q[0, 0, 0]))


def test_l2_norm_puts_eps_inside_the_root():
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    torch.testing.assert_close(l2_norm(x), torch.tensor([[3.0, 4.0], [0.0, 0.0]]) / torch.sqrt(torch.tensor([[25 + 1e-6], [1e-6]])))


def test_gate_formula():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    A_log, dt_bias = torch.randn(4), torch.randn(4)
    g, beta = gdn_gate(a, b, A_log, dt_bias)
    torch.testing.assert_close(g, -A_log.exp() * torch.log1p((a + dt_bias).exp()))
    torch.testing.assert_close(beta, 1 / (1 + (-b).exp()))
    _, beta2 = gdn_gate(a, b, A_log, dt_bias, allow_neg_eigval=True)
    torch.testing.assert_close(beta2, 2 * beta)


def test_short_conv_matches_padded_conv_and_continues_exactly():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 11, 6, generator=gen)
    w = torch.randn(6, 1, 4, generator=gen)
    bias = torch.randn(6, generator=gen)
    full = F.silu(F.conv1d(x.transpose(1, 2), w, bias, padding=3, groups=6)[..., :11]).transpose(1, 2)
    y, window = short_conv(x, w, bias)
    torch.testing.assert_close(y, full)
    torch.testing.assert_close(window, x[:, -3:].transpose(1, 2))
    parts, win = [], None
    for a, b in [(0, 1), (1, 3), (3, 4), (4, 11)]:
        out, win = short_conv(x[:, a:b], w, bias, window=win)
        parts.append(out)
    torch.testing.assert_close(torch.cat(parts, dim=1), full)
    y_lin, _ = short_conv(x, w.squeeze(1), None, activation=None)
    torch.testing.assert_close(y_lin, F.conv1d(x.transpose(1, 2), w, padding=3, groups=6)[..., :11].transpose(1, 2))


def test_short_conv_never_writes_the_window_it_was_given():
    x = torch.randn(1, 1, 3)
    window = torch.randn(1, 3, 3)
    before = window.clone()
    _, new = short_conv(x, torch.randn(3, 4), window=window)
    assert torch.equal(window, before) and new.data_ptr() != window.data_ptr()


def test_rms_norms():
    x, z, w = torch.randn(2, 3, 8), torch.randn(2, 3, 8), torch.randn(8)
    ref = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(rms_norm(x, w, 1e-6), ref)
    torch.testing.assert_close(gated_rms_norm(x, z, w, 1e-6), ref * F.silu(z))
    torch.testing.assert_close(gated_rms_norm(x, z, w, 1e-6, activation="sigmoid"), ref * torch.sigmoid(z))
    xz = x * F.silu(z)
    groups = xz.view(2, 3, 2, 4)
    grouped = (groups / torch.sqrt(groups.pow(2).mean(-1, keepdim=True) + 1e-6)).view(2, 3, 8) * w
    torch.testing.assert_close(gated_rms_norm(x, z, w, 1e-6, norm_before_gate=False, group_size=4), grouped)
    assert rms_norm(x.bfloat16(), w, 1e-6).dtype == torch.bfloat16


@pytest.mark.parametrize("T", [1, 65, 130])
def test_reference_forms_match_transformers_torch_fallbacks(T):
    import inspect

    from transformers.models.qwen3_next import modeling_qwen3_next as qwen3_next

    # transformers swaps FLA's Triton kernels in when fla is installed; unwrap to its torch code
    hf_chunk = inspect.unwrap(qwen3_next.torch_chunk_gated_delta_rule)
    hf_recurrent = inspect.unwrap(qwen3_next.torch_recurrent_gated_delta_rule)
    q, k, v, g, beta, h0 = _inputs(T)
    raw_q, raw_k = q * 2.0, k * 0.3
    o_c, s_c = gated_delta_rule(raw_q, raw_k, v, g, beta, initial_state=h0, use_qk_l2norm=True, form="chunk")
    o_r, s_r = gated_delta_rule(raw_q, raw_k, v, g, beta, initial_state=h0, use_qk_l2norm=True, form="recurrent")
    o_hc, s_hc = hf_chunk(raw_q, raw_k, v, g, beta, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True)
    o_hr, s_hr = hf_recurrent(raw_q, raw_k, v, g, beta, initial_state=h0, output_final_state=True,
                              use_qk_l2norm_in_kernel=True)
    torch.testing.assert_close(o_c, o_hc, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s_c, s_hc, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(o_r, o_hr, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s_r, s_hr, atol=1e-5, rtol=1e-5)
