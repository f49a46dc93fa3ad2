"""`method=infllm` on a tiny random Llama (fp32, CPU): the method contract (read once, answer
many from clones, exact continuation, independent clones), InfLLM's bookkeeping checked against
counts and keys derived here from the sizes and the backbone's own projections, its reduction to
full attention while the whole history fits the window, and the schema's official defaults.
(Retrieval and logits against the official code: test_infllm_parity.py.)"""

from __future__ import annotations

import pytest
import torch

from memexp.backbones import load_backbone
from memexp.core.schema import ConfigError
from memexp.core.types import Question
from memexp.methods.infllm.config import InfLLMConfig
from memexp.methods.infllm.method import InfLLM
from memexp.methods.plain.method import Plain

TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": 258}
SMALL = dict(block_size=4, n_init=3, n_local=8, topk=2, repr_topk=2, exc_block_size=4, chunk_size=8,
             max_cached_block=3)


def tiny_llama(seed: int = 0):
    return load_backbone({"name": "tiny_llama_infllm_test", "arch": "llama", "tokenizer": "byte", "seed": seed,
                          "model": TINY})


def infllm(**fields):
    bb = tiny_llama()
    method = InfLLM(InfLLMConfig(**{**SMALL, **fields}))
    method.prepare(bb)
    return bb, method


def ids(n: int, seed: int = 0) -> list[int]:
    return torch.randint(3, 258, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def snapshot(state) -> list[dict]:
    out = []
    for m in state.layers:
        tensors = {k: v.clone() for k, v in vars(m).items() if isinstance(v, torch.Tensor) and not k.startswith("_")}
        tensors["block_repr"] = m.block_repr.clone()
        tensors["blocks"] = [(b.k.clone(), b.v.clone()) for b in m.blocks]
        out.append(tensors)
    return out


def assert_same(a: list[dict], b: list[dict]) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for key in x:
            if key == "blocks":
                assert len(x[key]) == len(y[key])
                for (k1, v1), (k2, v2) in zip(x[key], y[key]):
                    assert torch.equal(k1, k2) and torch.equal(v1, v2)
            else:
                assert torch.equal(x[key], y[key]), key


def question(prompt: str = "q", n: int = 6) -> Question:
    return Question("q", prompt, ["x"], "string_match", n)


def test_schema_defaults_are_the_official_ones():
    # thunlp/InfLLM config/llama-3-inf-llm.yaml and config/mistral-inf-llm.yaml (identical values)
    cfg = InfLLMConfig()
    assert (cfg.block_size, cfg.n_init, cfg.n_local, cfg.topk, cfg.repr_topk, cfg.max_cached_block,
            cfg.exc_block_size, cfg.chunk_size, cfg.distance_scale) == (128, 128, 4096, 16, 4, 32, 512, 8192, 1.0)
    assert cfg.base is None  # the backbone's rope_theta


@pytest.mark.parametrize("fields, message", [
    ({"exc_block_size": 16, "n_local": 8}, "method.exc_block_size=16: must be <= method.n_local=8"),
    ({"chunk_size": 6}, "method.chunk_size=6: must be a multiple of method.exc_block_size=4"),
    ({"max_cached_block": 1}, "method.max_cached_block=1: must be >= method.topk=2"),
    ({"repr_topk": 5}, "method.repr_topk=5: must be <= method.block_size=4"),
    ({"topk": 0}, "method.topk=0: must be an integer >= 1"),
])
def test_invalid_sizes_are_one_line_errors(fields, message):
    with pytest.raises(ConfigError) as e:
        InfLLMConfig(**{**SMALL, **fields})
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_cli_composes_with_the_official_defaults_and_refuses_a_recurrent_backbone(tmp_path):
    from memexp.core.compose import load_config

    cfg = load_config(["backbone=llama32_1b", "method=infllm", f"backbone.pretrained={tmp_path}"])
    assert cfg.method == InfLLMConfig()
    with pytest.raises(ConfigError, match=r"^method=infllm: backbone=tiny_gdn_random .*allowed methods here are"):
        load_config(["backbone=tiny_gdn_random", "method=infllm"])


def test_while_the_history_fits_the_window_it_is_full_attention():
    """Every key within n_local of every query: InfLLM's relative RoPE equals the backbone's
    absolute RoPE up to rounding, and nothing is retrieved."""
    context, prompt = ids(20), ids(5, seed=1)
    full = tiny_llama()
    plain = Plain().answer(full, Plain().read(full, context), prompt, question(n=5), stop=[])
    bb, method = infllm(n_local=64, n_init=2)
    answer = method.answer(bb, method.read(bb, context), prompt, question(n=5), stop=[])
    assert answer.ids == plain.ids
    state = full.init_state()
    ref = full.forward(state, context + prompt)
    mine = bb.init_state()
    assert torch.allclose(bb.forward(mine, context + prompt), ref, atol=1e-5)
    assert all(len(m.blocks) == 0 and m.init_k.shape[2] == 0 for m in mine.layers)


def test_beyond_the_window_it_differs_from_full_attention():
    context = ids(60)
    full = tiny_llama()
    bb, _ = infllm()
    assert not torch.allclose(bb.forward(bb.init_state(), context), full.forward(full.init_state(), context),
                              atol=1e-3)


def test_initial_tokens_and_blocks_hold_the_layers_keys_in_order():
    """After L tokens: the first n_init keys are the initial tokens, then floor((L - n_init - n_local)
    / block_size) blocks of consecutive keys, the rest in window and remainder. Keys are layer 0's
    k_proj of its normed input embeddings, unrotated."""
    L = 43
    bb, _ = infllm()
    state = bb.init_state()
    bb.forward(state, ids(L))
    attn = bb.layers[0].self_attn
    with torch.no_grad():
        h = bb.layers[0].input_layernorm(bb.input_embeddings(ids(L)))
        keys = attn.k_proj(h).view(L, 2, 16).transpose(0, 1)  # [Hkv, L, D]
    m = state.layers[0]
    assert torch.allclose(m.init_k[0], keys[:, :3], atol=1e-6)
    n_blocks = (L - 3 - 8) // 4
    assert len(m.blocks) == n_blocks == 8 and m.block_repr.shape == (1, n_blocks, 4 * 16)
    for i, block in enumerate(m.blocks):
        assert torch.allclose(block.k[0], keys[:, 3 + 4 * i : 3 + 4 * (i + 1)], atol=1e-6)
    assert torch.allclose(m.local_k[0], keys[:, -8:], atol=1e-6)
    assert m.host_bytes() == 2 * n_blocks * 2 * 4 * 16 * 4  # k and v x blocks x Hkv x block x D x fp32 bytes
    assert len(m.cache) <= 3 and m.loads == 0  # on a CPU the blocks already live where they are read


def test_representative_keys_are_keys_of_the_block():
    """Each head's part of a block's representative key is the mean of repr_topk of its KV head's
    keys in the block (here repr_topk = 1: exactly one of them)."""
    bb, _ = infllm(repr_topk=1)
    state = bb.init_state()
    bb.forward(state, ids(120))  # 27 blocks: more than the representative keys' first allocation (16)
    m = state.layers[1]
    assert m.block_repr.shape == (1, 27, 64)
    for block, rep in zip(m.blocks, m.block_repr[0]):
        for h, part in enumerate(rep.view(4, 16)):
            assert any(torch.allclose(part, key, atol=1e-6) for key in block.k[0, h // 2])


def test_retrieval_picks_topk_blocks_per_query_chunk():
    bb, _ = infllm()
    state = bb.init_state()
    for m in state.layers:
        m.record_retrieval = True
    bb.forward(state, ids(64))
    m = state.layers[0]
    assert len(m.retrieved) == 64 // 4
    # while at most topk = 2 blocks exist, all of them; afterwards exactly 2 of the existing ones
    assert all(len(r) <= 2 and r == sorted(set(r)) for r in m.retrieved)
    assert all(len(r) == 2 for r in m.retrieved[-8:]) and max(max(r) for r in m.retrieved if r) < len(m.blocks)
    assert len({tuple(r) for r in m.retrieved[-8:]}) > 1  # chunks retrieve different blocks


@pytest.mark.parametrize("cut", [8, 16, 40])
def test_continuation_is_exact_at_query_chunk_boundaries(cut):
    """forward(A); forward(B) equals forward(A + B) when A ends a query chunk (each forward call
    starts its own query chunks, as each official `append` call does)."""
    bb, _ = infllm()
    seq = ids(57)
    whole = bb.init_state()
    logits = bb.forward(whole, seq)
    parts = bb.init_state()
    bb.forward(parts, seq[:cut])
    assert torch.allclose(bb.forward(parts, seq[cut:]), logits, atol=1e-5)
    assert_same([{k: v.round(decimals=5) if v.is_floating_point() else v for k, v in d.items() if k != "blocks"}
                 for d in snapshot(parts)],
                [{k: v.round(decimals=5) if v.is_floating_point() else v for k, v in d.items() if k != "blocks"}
                 for d in snapshot(whole)])
    assert parts.position == whole.position == 57


def test_the_prefill_chunk_does_not_change_results():
    seq = ids(70)
    a, _ = infllm(chunk_size=8)
    b, _ = infllm(chunk_size=32)
    assert a.prefill_chunk == 8 and b.prefill_chunk == 32
    assert torch.allclose(a.forward(a.init_state(), seq), b.forward(b.init_state(), seq), atol=1e-5)


def test_clones_are_independent_both_ways():
    bb, _ = infllm()
    state = bb.init_state()
    bb.forward(state, ids(45))
    before = snapshot(state)
    branch = state.clone()
    bb.forward(branch, ids(30, seed=2))
    assert_same(snapshot(state), before)
    again = state.clone()
    bb.forward(state, ids(30, seed=3))
    assert_same(snapshot(again), before)


def test_read_once_answer_many_from_copies():
    bb, method = infllm()
    context = ids(50)
    memory = method.read(bb, context)
    before, position = snapshot(memory.state), memory.state.position
    q1, q2 = ids(7, seed=4), ids(5, seed=5)
    first = method.answer(bb, memory, q1, question(), stop=[])
    method.answer(bb, memory, q2, question(), stop=[])
    again = method.answer(bb, memory, q1, question(), stop=[])
    assert first.ids == again.ids and len(first.ids) == 6
    assert_same(snapshot(memory.state), before)
    # read stops at the context's last query-chunk boundary (48 = 12 x 4) and keeps the rest
    assert memory.state.position == position == 48 and memory.extra == context[48:]
    assert memory.context_len == 50
    # the official GreedySearch order on the whole prompt: all but its last token in chunk_size
    # pieces from the prompt's start, the last token alone, then one token per step
    state, prompt = bb.init_state(), context + q1
    for st in range(0, len(prompt) - 1, SMALL["chunk_size"]):
        bb.forward(state, prompt[st : min(len(prompt) - 1, st + SMALL["chunk_size"])])
    assert bb.generate(state, prompt[-1:], 6, stop=[]) == first.ids


def test_an_empty_question_is_refused():
    bb, method = infllm()
    with pytest.raises(ValueError, match="empty question_ids"):
        method.answer(bb, method.read(bb, ids(50)), [], question(), stop=[])


def test_figures_are_json_and_count_the_host_kv():
    import json

    bb, method = infllm()
    memory = method.read(bb, ids(50))
    stats = memory.stats
    json.dumps(stats)
    blocks_per_layer = (50 - 3 - 8) // 4
    assert stats["infllm_blocks"] == 2 * blocks_per_layer
    assert stats["infllm_host_kv_bytes"] == 2 * blocks_per_layer * (2 * 2 * 4 * 16 * 4)
    assert stats["device_peak_bytes"] is None and stats["infllm_device_cache_bytes"] == 0


def test_prepare_refuses_a_sliding_window_and_a_second_call():
    bb = load_backbone({"name": "w", "arch": "llama", "tokenizer": "byte", "window": 16, "model": TINY})
    with pytest.raises(ConfigError, match="backbone.window=16"):
        InfLLM(InfLLMConfig(**SMALL)).prepare(bb)
    bb, method = infllm()
    with pytest.raises(RuntimeError, match="already converted"):
        method.prepare(bb)


QWEN = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "intermediate_size": 96, "vocab_size": 258, "linear_num_key_heads": 2,
        "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4, "full_attention_interval": 2}


def tiny_qwen35():
    return load_backbone({"name": "tiny_qwen35_infllm_test", "arch": "qwen35", "tokenizer": "byte", "model": QWEN})


def test_on_the_hybrid_only_the_attention_layers_change_and_the_window_is_full_attention():
    """Qwen3.5: the full-attention layers (1, 3) get InfLLM, the GDN layers keep their recurrent
    state; with the whole history inside the window the logits are the backbone's own (partial
    RoPE, q/k norms and the output gate carried over)."""
    from memexp.backbones.stack import RecurrentState
    from memexp.methods.infllm.context_memory import ContextMemory

    full = tiny_qwen35()
    bb = tiny_qwen35()
    InfLLM(InfLLMConfig(**{**SMALL, "n_local": 64})).prepare(bb)
    seq = ids(40)
    state = bb.init_state()
    logits = bb.forward(state, seq)
    assert [type(s) for s in state.layers] == [RecurrentState, ContextMemory, RecurrentState, ContextMemory]
    assert torch.allclose(logits, full.forward(full.init_state(), seq), atol=1e-5)
    small = tiny_qwen35()
    InfLLM(InfLLMConfig(**SMALL)).prepare(small)
    state = small.init_state()
    assert not torch.allclose(small.forward(state, seq), logits, atol=1e-3)
    assert len(state.layers[1].blocks) == (40 - 3 - 8) // 4


def test_the_hybrid_reads_once_and_answers_from_copies():
    bb = tiny_qwen35()
    method = InfLLM(InfLLMConfig(**SMALL))
    method.prepare(bb)
    context = ids(45)
    memory = method.read(bb, context)
    first = method.answer(bb, memory, ids(6, seed=7), question(), stop=[])
    method.answer(bb, memory, ids(9, seed=8), question(), stop=[])
    assert method.answer(bb, memory, ids(6, seed=7), question(), stop=[]).ids == first.ids
    # read up to the last query-chunk boundary (44 = 11 x 4); the GDN layers read the tail at answer too
    assert memory.state.position == 44 and memory.extra == context[44:]
    assert memory.stats["infllm_blocks"] == 2 * ((44 - 3 - 8) // 4)


def test_blocks_kept_off_the_compute_device_load_through_a_bounded_cache(monkeypatch):
    """On a GPU blocks are copied to the host and loaded back through an LRU cache of
    max_cached_block blocks per layer; forced here on the CPU, the results are unchanged, every
    retrieval of an uncached block is a load and the cache never exceeds its bound."""
    from memexp.methods.infllm.context_memory import ContextMemory

    seq = ids(80)
    bb, _ = infllm()
    resident = bb.forward(bb.init_state(), seq)
    monkeypatch.setattr(ContextMemory, "_offloaded", property(lambda self: True))
    state = bb.init_state()
    for m in state.layers:
        m.record_retrieval = True
    sizes = []
    original = ContextMemory._on_device

    def watched(self, index):
        out = original(self, index)
        sizes.append(len(self.cache))
        return out

    monkeypatch.setattr(ContextMemory, "_on_device", watched)
    assert torch.allclose(bb.forward(state, seq), resident, atol=1e-6)
    m = state.layers[0]
    assert max(sizes) == 3 and m.loads >= len(set(b for r in m.retrieved for b in r))
    assert m.cache_bytes() == len(m.cache) * 2 * 2 * 4 * 16 * 4


def test_converted_layers_keep_the_checkpoints_tensor_names_and_weights():
    plain = tiny_llama()
    bb, _ = infllm()
    before, after = plain.model.state_dict(), bb.model.state_dict()
    assert list(before) == list(after)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_bf16_keeps_the_compute_dtype_through_the_memory():
    bb = load_backbone({"name": "bf16", "arch": "llama", "tokenizer": "byte", "dtype": "bfloat16", "model": TINY})
    InfLLM(InfLLMConfig(**SMALL)).prepare(bb)
    state = bb.init_state()
    logits = bb.forward(state, ids(60))
    m = state.layers[0]
    assert torch.isfinite(logits).all() and len(m.blocks) == (60 - 3 - 8) // 4
    assert m.blocks[0].k.dtype == m.remainder_score.dtype == m.block_repr.dtype == torch.bfloat16
