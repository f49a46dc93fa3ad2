"""The GDN backbone behind the native memory interface (tiny random configs, CPU)."""


import pytest
import torch
import torch.nn.functional as F

from memexp.backbones import load_backbone
from memexp.backbones.base import Channel
from memexp.backbones.gdn.model import GDNBackbone

TINY = {  # grouped values (4 value heads over 2 key heads), expand_v 1, non-trivial weights
    "hidden_size": 48, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 16, "expand_v": 1.0,
    "num_v_heads": 4, "vocab_size": 258, "initializer_range": 0.1,
}


def tiny(prefill_chunk=8, **model) -> GDNBackbone:
    return load_backbone({"name": "tiny", "arch": "gdn", "tokenizer": "byte", "prefill_chunk": prefill_chunk,
                          "model": {**TINY, **model}, "seed": 3})


def ids(n, seed=0):
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed))


def assert_states_close(a, b, atol=1e-5):
    assert a.position == b.position
    for x, y in zip(a.recurrent, b.recurrent):
        torch.testing.assert_close(x, y, atol=atol, rtol=1e-5)
    for x, y in zip(a.conv, b.conv):
        torch.testing.assert_close(x, y, atol=atol, rtol=1e-5)


def test_named_config_builds_a_working_model():
    bb = load_backbone("tiny_gdn_random")
    assert bb.name == "tiny_gdn_random" and bb.dtype == torch.float32 and bb.device.type == "cpu"
    assert bb.channels == [Channel(layer, head, 32) for layer in range(2) for head in range(2)]
    logits = bb.forward(bb.init_state(), bb.tokenizer.encode("hello", add_bos=True))
    assert logits.shape == (258,) and logits.dtype == torch.float32 and torch.isfinite(logits).all()


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 7, 8, 9, 17, 39])
def test_continuation_is_exact(cut):
    bb = tiny(prefill_chunk=8)
    x = ids(40)
    whole = bb.init_state()
    ref = bb.forward(whole, x)
    split = bb.init_state()
    bb.forward(split, x[:cut])
    out = bb.forward(split, x[cut:])
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert_states_close(split, whole)
    assert whole.position == 40


def test_token_by_token_equals_one_long_chunk():
    bb_long, bb_short = tiny(prefill_chunk=2048), tiny(prefill_chunk=8)
    x = ids(150, seed=1)
    ref = bb_long.forward(bb_long.init_state(), x)
    s = bb_short.init_state()
    for t in x[:-1].tolist():
        bb_short.forward(s, [t])
    torch.testing.assert_close(bb_short.forward(s, x[-1:]), ref, atol=1e-4, rtol=1e-4)


def test_clone_is_deep_and_continues_like_the_original():
    bb = tiny()
    s = bb.init_state()
    bb.forward(s, ids(20))
    c = s.clone()
    for a, b in zip(s.recurrent + s.conv, c.recurrent + c.conv):
        assert a.data_ptr() != b.data_ptr() and torch.equal(a, b)
    snapshot = s.clone()
    c.scale_recurrent(0.0)
    bb.forward(c, ids(5, seed=2))
    assert_states_close(s, snapshot, atol=0)
    c2 = s.clone()
    assert torch.equal(bb.forward(c2, ids(9, seed=3)), bb.forward(s, ids(9, seed=3)))
    assert_states_close(c2, s, atol=0)


def test_scale_recurrent_keeps_conv_windows_and_position():
    bb = tiny()
    s = bb.init_state()
    bb.forward(s, ids(12))
    conv = [w.clone() for w in s.conv]
    rec = [r.clone() for r in s.recurrent]
    s.scale_recurrent(0.5)
    assert all(torch.equal(r, 0.5 * r0) for r, r0 in zip(s.recurrent, rec))
    assert all(torch.equal(w, w0) for w, w0 in zip(s.conv, conv))
    s.scale_recurrent(0.0)
    assert all(not r.any() for r in s.recurrent) and s.position == 12


def test_state_bytes_match_the_state():
    bb = tiny()
    s = bb.init_state()
    # per layer: 4 value heads x 16 x 16 fp32; conv window (2*32 + 64 channels) x 3 fp32
    assert s.nbytes() == 2 * (4 * 16 * 16 * 4 + (2 * 32 + 64) * 3 * 4)


def test_generate_equals_argmax_over_full_forwards():
    bb = tiny()
    ctx, prompt = ids(30), ids(4, seed=5)
    s = bb.init_state()
    bb.forward(s, ctx)
    out = bb.generate(s, prompt, max_new_tokens=8, stop=[])
    seq = torch.cat([ctx, prompt]).tolist()
    expected = []
    for _ in range(8):
        nxt = int(bb.forward(bb.init_state(), seq).argmax())
        expected.append(nxt)
        seq.append(nxt)
    assert out == expected
    assert s.position == 30 + 4 + 7


def test_min_new_tokens_bars_stop_ids_then_lets_them_end_the_answer():
    """A stop id that greedy decoding would pick first is passed over for the next best
    token while fewer than min_new_tokens tokens exist (transformers' min-length rule),
    and ends the answer once allowed."""
    bb = tiny()
    s = bb.init_state()
    bb.forward(s, ids(30))
    prompt = ids(4, seed=5)
    first, second = torch.topk(bb.forward(s.clone(), prompt), 2).indices.tolist()
    assert bb.generate(s.clone(), prompt, max_new_tokens=5, stop=[first]) == [first]
    barred = bb.generate(s.clone(), prompt, max_new_tokens=5, stop=[first], min_new_tokens=1)
    assert barred[0] == second and len(barred) >= 2


def _layer_features(bb, x):
    """Keys/queries of every layer from the weights: full-sequence padded conv, explicit
    normalisation, FLA's naive recurrence and FLA's block structure."""
    from fla.ops.gated_delta_rule import naive_recurrent_gated_delta_rule

    m, c = bb.model.model, bb.config
    h = m.embeddings.weight[x][None]
    feats = []

    def rms(t, w):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + c.norm_eps) * w

    def conv(t, w):
        return F.silu(F.conv1d(t.transpose(1, 2), w, padding=w.shape[-1] - 1, groups=t.shape[-1])[..., : t.shape[1]]).transpose(1, 2)

    for block in m.layers:
        a = block.attn
        n = rms(h, block.attn_norm.weight)
        q = conv(n @ a.q_proj.weight.T, a.q_conv1d.weight).view(1, -1, c.num_heads, c.head_dim)
        k = conv(n @ a.k_proj.weight.T, a.k_conv1d.weight).view(1, -1, c.num_heads, c.head_dim)
        v = conv(n @ a.v_proj.weight.T, a.v_conv1d.weight).view(1, -1, c.v_heads, c.head_v_dim)
        q = q / torch.sqrt(q.pow(2).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt(k.pow(2).sum(-1, keepdim=True) + 1e-6)
        feats.append((k[0], q[0]))
        g = -a.A_log.exp() * F.softplus(n @ a.a_proj.weight.T + a.dt_bias)
        beta = torch.sigmoid(n @ a.b_proj.weight.T)
        G = c.v_heads // c.num_heads
        o, _ = naive_recurrent_gated_delta_rule(q.repeat_interleave(G, 2), k.repeat_interleave(G, 2), v, beta, g)
        gate = (n @ a.g_proj.weight.T).view(o.shape)
        o = rms(o, a.o_norm.weight) * F.silu(gate)
        h = h + o.reshape(1, -1, c.value_dim) @ a.o_proj.weight.T
        n = rms(h, block.mlp_norm.weight)
        mlp = block.mlp
        h = h + (F.silu(n @ mlp.gate_proj.weight.T) * (n @ mlp.up_proj.weight.T)) @ mlp.down_proj.weight.T
    logits = rms(h[0, -1], m.norm.weight) @ bb.model.lm_head.weight.T
    return feats, logits


def test_observer_sees_the_recurrence_inputs_chunk_by_chunk():
    bb = tiny(prefill_chunk=8)
    x = ids(21)
    seen = []

    def observer(layer, start, keys, queries):
        seen.append((layer, start, keys.clone(), queries.clone()))

    s = bb.init_state()
    bb.forward(s, x[:3])
    logits = bb.forward(s, x[3:], observer=observer)
    # 18 tokens in chunks of 8: starts 0, 8, 16; every layer in order within a chunk
    assert [(layer, start) for layer, start, _, _ in seen] == [(0, 0), (1, 0), (0, 8), (1, 8), (0, 16), (1, 16)]
    assert [k.shape for _, _, k, _ in seen] == [(8, 2, 16)] * 4 + [(2, 2, 16)] * 2
    feats, ref_logits = _layer_features(bb, x)
    for layer in range(2):
        keys = torch.cat([k for lay, _, k, _ in seen if lay == layer])
        queries = torch.cat([q for lay, _, _, q in seen if lay == layer])
        # unit norm up to the eps inside the root: |x| / sqrt(|x|^2 + 1e-6)
        assert ((keys.norm(dim=-1) - 1).abs() < 1e-3).all() and (keys.norm(dim=-1) <= 1 + 1e-6).all()
        torch.testing.assert_close(keys, feats[layer][0][3:], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(queries, feats[layer][1][3:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=1e-5)


def test_observer_does_not_change_results():
    bb = tiny()
    x = ids(19)
    plain = bb.forward(bb.init_state(), x)
    observed = bb.forward(bb.init_state(), x, observer=lambda *a: None)
    assert torch.equal(plain, observed)


def test_save_pretrained_round_trip(tmp_path):
    bb = tiny()
    bb.save_pretrained(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json"}
    again = load_backbone({"name": "again", "arch": "gdn", "pretrained": str(tmp_path), "prefill_chunk": 8})
    x = ids(33)
    assert torch.equal(again.forward(again.init_state(), x), bb.forward(bb.init_state(), x))
    text = "Grüße, 世界! tab\tand newline\n"
    assert again.tokenizer.encode(text, add_bos=True) == bb.tokenizer.encode(text, add_bos=True)
    assert again.tokenizer.decode(again.tokenizer.encode(text)) == text
    assert (again.tokenizer.bos_id, again.tokenizer.eos_id) == (256, 257)


def test_tied_embeddings_round_trip(tmp_path):
    bb = tiny(tie_word_embeddings=True)
    assert bb.model.lm_head.weight is bb.model.model.embeddings.weight
    bb.save_pretrained(tmp_path)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as f:
        assert "lm_head.weight" not in f.keys()
    again = load_backbone({"name": "again", "arch": "gdn", "pretrained": str(tmp_path), "prefill_chunk": 8})
    assert again.model.lm_head.weight is again.model.model.embeddings.weight
    x = ids(10)
    assert torch.equal(again.forward(again.init_state(), x), bb.forward(bb.init_state(), x))


def test_random_init_is_seeded():
    a, b = tiny(), tiny()
    torch.manual_seed(123)
    c = tiny()
    for (n, p), (_, q), (_, r) in zip(a.model.named_parameters(), b.model.named_parameters(), c.model.named_parameters()):
        assert torch.equal(p, q) and torch.equal(p, r), n


def test_byte_tokenizer_round_trips_text():
    bb = load_backbone("tiny_gdn_random")
    tok = bb.tokenizer
    text = "The quick brown fox — ünïcödé ✓\n"
    ids_ = tok.encode(text, add_bos=True)
    assert ids_[0] == 256 and ids_[1:] == list(text.encode("utf-8"))
    assert tok.decode(ids_ + [tok.eos_id]) == text
    assert tok.stop_ids == [257]


def test_training_forward_matches_the_stateful_forward_and_is_differentiable():
    bb = tiny(prefill_chunk=8)
    x = torch.stack([ids(70, seed=1), ids(70, seed=2)])
    logits = bb.train_forward(x)
    assert logits.shape == (2, 70, 258)
    for row in range(2):
        for end in (1, 9, 70):
            torch.testing.assert_close(logits[row, end - 1], bb.forward(bb.init_state(), x[row, :end]), atol=1e-5, rtol=1e-5)
    logits.sum().backward()
    grads = [p.grad for p in bb.model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert bb.model.model.layers[0].attn.A_log.grad.abs().sum() > 0
