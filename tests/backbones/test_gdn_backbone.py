"""The GDN backbone: named config, state shapes, costs, FLA's naive recurrence, checkpoints,
seeded init, byte tokenizer (tiny random configs, CPU). The contract every architecture meets
(continuation, clones, rescale, observer, generate, training forward) is in test_contract.py."""


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


def test_named_config_builds_a_working_model():
    bb = load_backbone("tiny_gdn_random")
    assert bb.name == "tiny_gdn_random" and bb.dtype == torch.float32 and bb.device.type == "cpu"
    assert bb.channels == [Channel(layer, head, 32) for layer in range(2) for head in range(2)]
    logits = bb.forward(bb.init_state(), bb.tokenizer.encode("hello", add_bos=True))
    assert logits.shape == (258,) and logits.dtype == torch.float32 and torch.isfinite(logits).all()


def test_state_bytes_match_the_state():
    bb = tiny()
    s = bb.init_state()
    # per layer: 4 value heads x 16 x 16 fp32; conv window (2*32 + 64 channels) x 3 fp32
    assert s.nbytes() == 2 * (4 * 16 * 16 * 4 + (2 * 32 + 64) * 3 * 4)


def _naive_logits(bb, x):
    """The last logits from the weights: full-sequence padded conv, explicit normalisation,
    FLA's naive recurrence and FLA's block structure."""
    from fla.ops.gated_delta_rule import naive_recurrent_gated_delta_rule

    m, c = bb.model.model, bb.config
    h = m.embeddings.weight[x][None]

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
    return rms(h[0, -1], m.norm.weight) @ bb.model.lm_head.weight.T


def test_grouped_values_match_fla_naive_recurrence_read_in_pieces():
    """Grouped value heads (4 over 2 key heads) with non-trivial weights, read as 3 tokens then
    18 in prefill chunks of 8, give the logits of FLA's naive recurrence over the whole
    sequence. (Observer features and continuation for every arch: test_contract.py.)"""
    bb = tiny(prefill_chunk=8)
    x = ids(21)
    s = bb.init_state()
    bb.forward(s, x[:3])
    torch.testing.assert_close(bb.forward(s, x[3:]), _naive_logits(bb, x), atol=1e-5, rtol=1e-5)


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


