"""Analytical FLOPs and storage (memexp.costs.report) against the NoteBank paper and real modules."""

import json

import pytest
import torch

from memexp.backbones.gdn.costs import state_bytes as gdn_state_bytes
from memexp.backbones.shapes import shapes_for
from memexp.benchmarks.ruler.config import RulerConfig
from memexp.core.schema import BackboneConfig, ConfigError, LoggerConfig, RunConfig
from memexp.costs.report import (
    GIB,
    MIB,
    PAPER_OUTPUT_TOKENS,
    PAPER_QUESTION_TOKENS,
    PAPER_REPLAY_TOKENS,
    cost_report,
    format_cost_table,
    key_pairs,
    mha_kv_cache_bytes,
    plain_flops,
    record_costs,
)
from memexp.methods.jrt.config import JRTConfig
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.notebank.costs import notebank_added_flops
from memexp.methods.plain.config import PlainConfig

PAPER_GDN = {"hidden_size": 2048, "num_hidden_layers": 24, "num_heads": 8, "head_dim": 256, "expand_v": 1,
             "intermediate_size": 5632, "vocab_size": 32000, "conv_size": 4}
PAPER_HELPER_BYTES = 0.402 * MIB  # M_helper of the paper's implementation (App. C.7, Eq. 20)
ONE_M = 1_048_576


def shapes_of(arch: str, fields: dict, window: int | None = None):
    """The cost shapes of `backbone.model` fields (random init), as `memexp cost` builds them."""
    return shapes_for(BackboneConfig(name="t", arch=arch, model=fields, window=window))


def run_config(backbone: BackboneConfig, method=None) -> RunConfig:
    return RunConfig(backbone=backbone, method=method or NoteBankConfig(), bench=RulerConfig(), logger=LoggerConfig())


@pytest.fixture(scope="module")
def gdn_cfg() -> RunConfig:
    """`backbone=gdn method=notebank` as the command line composes it; offline, so the
    shapes come from the built-in table for the paper checkpoint."""
    from memexp.core.compose import load_config

    return load_config(["backbone=gdn", "method=notebank"])


def test_paper_gdn_flops_per_token():
    """App. C.6, per layer (D = 2048, 8 heads x 256, MLP 5632, c_conv = 4):
    q, k, v, g, o: 5 x 2 x 2048 x 2048 = 41,943,040; a, b: 2 x 2 x 2048 x 8 = 65,536;
    MLP: 3 x 2 x 2048 x 5632 = 69,206,016; conv: 2 x 4 x 8 x (2 x 256 + 256) = 49,152;
    recurrence: 8 x (7 x 256^2 + 256 + 2 x 256) = 3,676,160; sum 114,939,904 x 24 layers
    = 2,758,557,696 ~ 2.759e9 (paper). LM head 2 x 2048 x 32000 = 131,072,000 ~ 1.311e8."""
    s = shapes_of("gdn", PAPER_GDN)
    assert s.flops_token == 2_758_557_696
    assert s.flops_lm_head == 131_072_000
    assert s.flops_token == pytest.approx(2.759e9, abs=0.0005e9)  # the paper's printed precision
    assert s.flops_lm_head == pytest.approx(1.311e8, abs=0.0005e8)


def test_cost_reproduces_the_paper_at_1m_context(gdn_cfg):
    """`cost backbone=gdn method=notebank length=1048576` with the paper's question and
    answer lengths and replay (|Q| = 42, |Y| = 128, |R| = 107: see memexp.costs.report for how they
    follow from the paper's own figures) and its helper size M_helper = 0.402 MiB; notes are
    bounded by W floor(T/C) = 2 x 2048 = 4096 full-length notes (U = 4096 x 64).

    FLOPs (Eqs. 12-16): Plain (T + 42 + 127) f + 128 h = 2892.9 TFLOPs; added = write
    310.0 G (6TJd_k dominates: 6 x 2^20 x 192 x 256) + route 1.095 G + (42 + 107) f = 411.0 G
    -> 722.2 GFLOPs, ratio 0.0250 % (paper 0.025 %), tolerance 2 %.
    Storage (Eqs. 17-20): recurrent 4 x 192 x 256^2 = 48 MiB, conv 2 x 4 x 192 x 768 =
    1.125 MiB, addresses 2 x 4096 x 192 x 16 = 24 MiB + 0.402 MiB helpers = 24.40 MiB
    (paper 24.4), host 4 x 262,144 + 24 x 4096 = 1.094 MiB, total 74.62 MiB (paper 74.5;
    the recorded 4092.3 notes of 56.8 tokens give 74.49, see the next test), tolerance 0.5 %.
    Matched MHA: 4 x 24 x 2048 x (2^20 + 42) bytes = 192.0 GiB (paper 192 GiB, 0.1 %),
    2,635x the NoteBank payload (paper: about 2,600; 2,638 from recorded counts)."""
    r = cost_report(gdn_cfg, ONE_M, PAPER_QUESTION_TOKENS, PAPER_OUTPUT_TOKENS, replay_tokens=PAPER_REPLAY_TOKENS,
                    helper_bytes=PAPER_HELPER_BYTES)
    assert "built-in shapes" in r["backbone"]["source"]
    assert r["flops"]["backbone_per_token"] == pytest.approx(2.759e9, abs=0.0005e9)
    assert r["flops"]["lm_head_per_token"] == pytest.approx(1.311e8, abs=0.0005e8)
    assert r["flops"]["added_ratio_percent"] == pytest.approx(0.025, rel=0.02)
    archive = r["storage"]["archive"]
    assert (archive["device_addresses"] + archive["device_helpers"]) / MIB == pytest.approx(24.4, rel=0.005)
    assert r["storage"]["total"] / MIB == pytest.approx(74.5, rel=0.005)
    assert r["storage"]["mha_kv_cache"] / GIB == pytest.approx(192, rel=0.001)
    assert 2600 <= r["storage"]["mha_over_total"] <= 2650
    assert r["inputs"]["assumed"] == ["notes = W * floor(T / C)", "archived tokens = notes * B"]


def test_recorded_means_reproduce_eqs_18_to_21(gdn_cfg):
    """With the paper's recorded means at the 1M target (Eq. 18: P = 1,048,019, N_T = 4092.3,
    U = 232,514; |Q| = 41.8, |R| = 107.2 as derived in memexp.costs.report) the equations give the
    paper's figures to its printed precision: Plain 2891.4 TFLOPs, added 0.722 TFLOPs, routing
    1.09 GFLOPs (App. D.1), archive 24.959 MiB (2 x 4092.3 x 192 x 16 + 4 x 232,514 +
    24 x 4092.3 = 26,170,362 B), host 0.98 MiB (Table 7), total 48 + 1.125 + 24.959 + 0.402
    = 74.49 MiB, MHA 196,503.5 MiB and the ratio 2638 (Eq. 21)."""
    q = 41.8
    r = cost_report(gdn_cfg, 1_048_019 - 42, q, 128, replay_tokens=107.2, notes=4092.3, archived_tokens=232_514,
                    helper_bytes=PAPER_HELPER_BYTES)
    f, s = r["flops"], r["storage"]
    assert f["plain"] / 1e12 == pytest.approx(2891.4, abs=0.05)
    assert f["added"]["total"] / 1e12 == pytest.approx(0.722, abs=0.0005)
    assert f["added"]["route"] / 1e9 == pytest.approx(1.09, abs=0.005)
    a = s["archive"]
    assert (a["device_addresses"] + a["host_token_ids"] + a["host_metadata"]) / MIB == pytest.approx(24.959, abs=5e-4)
    assert (a["host_token_ids"] + a["host_metadata"]) / MIB == pytest.approx(0.98, abs=0.005)
    assert s["total"] / MIB == pytest.approx(74.49, abs=0.005)
    assert s["mha_kv_cache"] / MIB == pytest.approx(196_503.5, abs=0.5)  # P = 1,048,019 - 42 + 42
    assert s["mha_over_total"] == pytest.approx(2638, abs=1)
    assert r["inputs"]["assumed"] == []


def test_unrecorded_counts_fall_back_to_bounds(gdn_cfg):
    """Without recorded counts the report bounds them (|R| = R B = 128 replayed tokens), so
    the ratio is an upper estimate: 0.0270 % instead of 0.025 %. memexp's own helper is the
    coordinate selection, 192 x 16 int64 = 24 KiB."""
    r = cost_report(gdn_cfg, ONE_M, PAPER_QUESTION_TOKENS, PAPER_OUTPUT_TOKENS)
    assert r["inputs"]["replay"] == 128 and r["inputs"]["notes"] == 4096 and r["inputs"]["archived"] == 4096 * 64
    assert len(r["inputs"]["assumed"]) == 3
    assert r["flops"]["added_ratio_percent"] == pytest.approx(0.0270, abs=5e-5)
    assert r["storage"]["archive"]["device_helpers"] == 192 * 16 * 8


def test_table_and_json(gdn_cfg):
    r = cost_report(gdn_cfg, ONE_M, PAPER_QUESTION_TOKENS, PAPER_OUTPUT_TOKENS)
    assert json.loads(json.dumps(r)) == r
    table = format_cost_table(r)
    for row in ("backbone FLOPs / token", "added FLOPs ratio (Eq. 16)", "0.0270 %", "persistent storage (Eq. 20)",
                "matched full-MHA KV cache (Eq. 17)", "192 GiB", "bounds used"):
        assert row in table


def test_plain_method_reports_no_overhead(gdn_cfg):
    cfg = run_config(gdn_cfg.backbone, PlainConfig())
    r = cost_report(cfg, 4096, 42, 128)
    assert r["flops"]["added"] is None and r["flops"]["added_ratio_percent"] == 0
    assert r["storage"]["archive"] == {} and r["storage"]["total"] / MIB == pytest.approx(48 + 1.125)


def test_shapes_from_model_fields_local_dir_and_missing_hub_config(tmp_path):
    """Random-init `model` fields, a local directory's config.json, and a clear error for a
    hub id that is neither cached nor built in (tests run with HF_HUB_OFFLINE=1)."""
    tiny = BackboneConfig(name="tiny", model={"hidden_size": 64, "num_hidden_layers": 2, "num_heads": 2,
                                              "head_dim": 32, "vocab_size": 258})
    r = cost_report(run_config(tiny), 4096, 10, 8)
    assert r["backbone"]["source"].startswith("backbone.model")
    assert r["backbone"]["channels"] == 4 and r["backbone"]["d_k"] == 32
    (tmp_path / "config.json").write_text(json.dumps(PAPER_GDN))
    local = BackboneConfig(name="local", pretrained=str(tmp_path))
    r = cost_report(run_config(local), 4096, 10, 8)
    assert r["backbone"]["source"] == str(tmp_path / "config.json")
    assert r["flops"]["backbone_per_token"] == 2_758_557_696
    missing = BackboneConfig(name="nowhere", pretrained="memexp-tests/no-such-model")
    with pytest.raises(ConfigError, match="memexp-tests/no-such-model.*config.json"):
        cost_report(run_config(missing), 4096, 10, 8)
    with pytest.raises(ConfigError, match="backbone.model.n_embd: unknown field"):  # as `run` refuses it
        cost_report(run_config(BackboneConfig(name="g2", arch="gdn2", model={"n_embd": 64})), 4096, 10, 8)


def linear_flops(model: torch.nn.Module, skip: str = "lm_head") -> int:
    return sum(2 * m.weight.numel() for n, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and not n.endswith(skip))


def test_gdn_projection_terms_and_state_match_memexp_backbone():
    """f_phi minus the conv and recurrence terms is 2 x the weights of every linear layer of
    memexp's GDN; h_phi is 2 x the LM head; the state bytes are what a State holds."""
    from memexp.backbones import load_backbone

    bb = load_backbone("tiny_gdn_random")
    L, H, K, V, W = 2, 2, 32, 64, 4  # expand_v defaults to 2
    conv = L * 2 * W * (2 * H * K + H * V)
    rec = L * H * (7 * K * V + K + 2 * V)
    s = shapes_of("gdn", bb.config.to_fla_dict())
    assert s.flops_token - conv - rec == linear_flops(bb.model)
    assert s.flops_lm_head == 2 * bb.model.lm_head.weight.numel()
    assert bb.dtype == torch.float32  # memexp's state keeps conv_size - 1 inputs; the accounting counts conv_size
    assert sum(gdn_state_bytes(bb.config, 4, conv_columns=W - 1).values()) == bb.init_state().nbytes()


def test_attention_mamba2_qwen35_projections_match_transformers_modules():
    """2 d_in d_out summed over every linear layer of tiny transformers models: Llama (GQA),
    Mamba-2 (in_proj / out_proj, conv and SSD recurrence added analytically) and the Qwen3.5
    hybrid (GDN and gated-attention layers)."""
    transformers = pytest.importorskip("transformers")
    llama_cfg = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, vocab_size=100)
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(**llama_cfg))
    s = shapes_of("llama", llama_cfg)
    assert s.flops_token == linear_flops(llama) and s.flops_lm_head == 2 * 64 * 100
    assert s.flops_key == 2 * 4 * 4 * 16

    m_cfg = dict(hidden_size=64, num_hidden_layers=2, num_heads=8, head_dim=16, state_size=16, n_groups=2,
                 conv_kernel=4, vocab_size=100, expand=2)
    mamba = transformers.Mamba2ForCausalLM(transformers.Mamba2Config(**m_cfg))
    d_inner, conv_dim = 128, 128 + 2 * 2 * 16
    analytic = 2 * (2 * 4 * conv_dim + 8 * (5 * 16 * 16 + 3 * 16))
    s = shapes_of("mamba2", m_cfg)
    assert s.flops_token - analytic == linear_flops(mamba)
    assert s.channels == 4  # 2 layers x 2 B/C groups
    assert d_inner == mamba.backbone.layers[0].mixer.out_proj.in_features

    q_cfg = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                 linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4, vocab_size=100)
    qwen = transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(**q_cfg))
    gdn_layers = 3  # every 4th layer is full attention
    analytic = gdn_layers * (2 * 4 * (2 * 32 + 64) + 4 * (7 * 16 * 16 + 16 + 2 * 16))
    s = shapes_of("qwen35", q_cfg)
    assert s.flops_token - analytic == linear_flops(qwen)
    assert s.flops_key == 1 * 4 * 4 * 16
    assert s.channels == gdn_layers * 2


@pytest.mark.parametrize("window", [None, 1, 7, 40])
@pytest.mark.parametrize("start,count", [(0, 1), (0, 30), (5, 12), (33, 20), (0, 0)])
def test_key_pairs_counts_causal_keys(start, count, window):
    brute = sum(min(p + 1, window or p + 1) for p in range(start, start + count))
    assert key_pairs(start, count, window) == brute


@pytest.mark.parametrize("window", [None, 16])
def test_hybrid_overhead_counts_the_attention_that_does_not_cancel(window):
    """For attention layers ΔF adds the probe's keys and the keys that the replay adds in
    front of the question and answer: brute force over the two token sequences."""
    shapes = shapes_of("llama", {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                                 "intermediate_size": 96, "vocab_size": 100}, window=window)
    shapes = type(shapes)(**{**shapes.__dict__, "channels": 4, "d_k": 16})  # as if it had recurrent channels
    nb = NoteBankConfig(chunk_size=16)
    T, Q, R, Y, N = 50, 6, 9, 4, 3.0

    def keys(positions):
        return sum(min(p + 1, window or p + 1) for p in positions)

    plain = keys(range(T + Q + Y - 1))
    notebank = keys(range(T + R + Q + Y - 1)) + keys(range(T, T + Q))  # answer path + probe on a copy
    added = notebank_added_flops(shapes, nb, T, Q, R, N, Y)
    assert added["attention"] == shapes.flops_key * (notebank - plain)
    assert added["probe"] == Q * shapes.flops_token and added["replay"] == R * shapes.flops_token
    assert plain_flops(shapes, T, Q, Y) == (T + Q + Y - 1) * shapes.flops_token + Y * shapes.flops_lm_head \
        + shapes.flops_key * plain


def test_empty_archive_and_non_native_routers():
    """An empty archive costs writing only (no probe, routing or replay); BM25 routes without
    the probe or Eq. 15."""
    shapes = shapes_of("gdn", PAPER_GDN)
    nb = NoteBankConfig()
    empty = notebank_added_flops(shapes, nb, 1000, 40, 0, 0, 32)
    assert empty["total"] == empty["write"] > 0
    bm25 = notebank_added_flops(shapes, NoteBankConfig(router="bm25"), 8192, 40, 100, 32, 32, probe=0)
    assert bm25["route"] == 0 and bm25["probe"] == 0 and bm25["replay"] == 100 * shapes.flops_token


def test_record_costs_from_recorded_counts(gdn_cfg):
    """The runner's call: token counts of one record plus NoteBank's read stats."""
    tokens = {"context": ONE_M, "question": 42, "replay": 107, "probe": 42, "generated": 128}
    stats = {"notes": 4096, "archived_tokens": 4096 * 64, "address_index_bytes": int(PAPER_HELPER_BYTES)}
    shapes = shapes_for(gdn_cfg.backbone)
    c = record_costs(shapes, gdn_cfg.method, tokens, stats)
    report = cost_report(gdn_cfg, ONE_M, 42, 128, replay_tokens=107, notes=4096, archived_tokens=4096 * 64,
                         helper_bytes=int(PAPER_HELPER_BYTES))
    assert c["assumed"] == []
    assert c["plain_flops"] == report["flops"]["plain"]
    assert c["added_flops"] == report["flops"]["added"]["total"]
    assert c["added_flops_ratio"] == pytest.approx(0.025, rel=0.02)
    assert c["storage_bytes"] == report["storage"]["total"] == c["state_bytes"] + c["archive_bytes"]
    assert c["mha_kv_cache_bytes"] == mha_kv_cache_bytes(24, 2048, ONE_M + 42) == 4 * 24 * 2048 * (ONE_M + 42)
    plain = record_costs(shapes, PlainConfig(), {"context": 4096, "question": 42, "generated": 9})
    assert plain["added_flops"] == 0 and plain["archive_bytes"] == 0
    assert plain["plain_flops"] == (4096 + 42 + 8) * 2_758_557_696 + 9 * 131_072_000
    jrt = record_costs(shapes, JRTConfig(), {"context": 4096, "question": 42, "generated": 9})
    assert jrt["added_flops"] is None and jrt["added_flops_ratio"] is None  # not modelled, kept out of summaries


def test_cost_command_takes_the_measured_replay_length(capsys):
    """`python -m memexp cost`: the replay bound R B by default, the paper's measured |R| with
    replay_tokens=107 (its 0.025 %); routers that do not probe add no probe or routing FLOPs."""
    import json

    from memexp.__main__ import main

    def cost(*args):
        capsys.readouterr()
        assert main(["cost", "backbone=gdn", "length=1048576", "--json", *args]) == 0
        return json.loads(capsys.readouterr().out)

    bound, measured, bm25 = cost(), cost("replay_tokens=107"), cost("method.router=bm25")
    assert bound["inputs"]["replay"] == 128 and measured["inputs"]["replay"] == 107
    assert measured["flops"]["added_ratio_percent"] == pytest.approx(0.025, rel=0.02)
    assert bound["flops"]["added_ratio_percent"] > measured["flops"]["added_ratio_percent"]
    assert bm25["flops"]["added"]["probe"] == 0 and bm25["flops"]["added"]["route"] == 0
    assert bound["flops"]["added"]["probe"] > 0


def test_clean_start_adds_no_flops_and_jrt_is_not_modelled():
    """Clean start reads as Plain does (a rescale costs no FLOPs); JRT's second reading is not
    modelled, so it reports None rather than a number."""
    from memexp.backbones.shapes import shapes_for
    from memexp.core.compose import load_config
    from memexp.costs.report import record_costs

    tokens = {"context": 1000, "question": 10, "generated": 5}
    got = {}
    for m in ("plain", "clean_start", "jrt"):
        cfg = load_config(["backbone=tiny_mamba2_random", f"method={m}"])
        got[m] = record_costs(shapes_for(cfg.backbone), cfg.method, tokens)["added_flops"]
    assert got == {"plain": 0.0, "clean_start": 0.0, "jrt": None}
