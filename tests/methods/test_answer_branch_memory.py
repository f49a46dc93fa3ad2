"""An answer branch (a clone of the retained state, then replay, question and answer) holds about
the context's KV once, not the ~3x that cloning to the exact length and then doubling on the first
append gave (issue 15: what ran MemoryAgentBench's ~746K-token hybrid runs out of GPU memory).
Bytes are read from the tensors' storages, not from the cache's own accounting."""

import torch

from memexp.backbones import load_backbone
from memexp.backbones.kv_cache import KVCache

ROW = (1, 2, 8)  # [B, Hkv, D] of one cached token in the unit tests; fp32


def held(cache: KVCache) -> int:
    """Bytes the cache's buffers occupy, written or not."""
    return cache.k.untyped_storage().nbytes() + cache.v.untyped_storage().nbytes()


def written(length: int, dtype=torch.float32) -> int:
    b, h, d = ROW
    return 2 * b * length * h * d * torch.empty((), dtype=dtype).element_size()


def filled(length: int, chunk: int = 2048) -> tuple[KVCache, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    k = torch.randn(ROW[0], length, *ROW[1:], generator=g)
    v = torch.randn(ROW[0], length, *ROW[1:], generator=g)
    cache = KVCache.empty(ROW[0], ROW[1], ROW[2], torch.float32, torch.device("cpu"))
    for s in range(0, length, chunk):
        cache.append(k[:, s : s + chunk], v[:, s : s + chunk])
    return cache, k, v


def test_a_clone_takes_replay_question_and_a_short_answer_without_doubling():
    length = 10_000
    cache, k, v = filled(length)
    branch = cache.clone()
    extra_k, extra_v = torch.ones(ROW[0], 128 + 16, *ROW[1:]), torch.full((ROW[0], 128 + 16, *ROW[1:]), 2.0)
    branch.append(extra_k[:, :128], extra_v[:, :128])  # the replay and question, one forward call
    for t in range(16):  # a short greedy answer, one token at a time
        keys, values = branch.append(extra_k[:, 128 + t : 129 + t], extra_v[:, 128 + t : 129 + t])
    assert held(branch) <= 1.25 * written(length)  # doubling would hold 2x
    assert torch.equal(keys, torch.cat([k, extra_k], 1)) and torch.equal(values, torch.cat([v, extra_v], 1))
    assert torch.equal(cache.k[:, : cache.length], k) and cache.length == length  # the original is untouched


def test_a_long_answer_grows_a_large_branch_by_a_bounded_step():
    length = 200_000
    cache, _, _ = filled(length, chunk=50_000)
    assert held(cache) <= 1.5 * written(length)  # the retained state's own buffer is bounded too
    branch = cache.clone()
    one, first = torch.zeros(ROW[0], 1, *ROW[1:]), branch.capacity
    while branch.capacity == first and branch.length < length + 10_000:
        branch.append(one, one)  # until the first growth
    assert branch.capacity > first  # it did grow past the clone's headroom
    assert held(branch) <= 1.5 * written(length)  # doubling would hold 2x


def test_a_hybrid_answer_branch_holds_about_the_contexts_kv_once():
    bb = load_backbone("tiny_qwen35_random")
    tok = bb.tokenizer
    context = tok.encode("The grass is green. The sky is blue. Here we go again. " * 110, add_bos=True)
    state = bb.init_state()
    bb.forward(state, context)
    kv = [s for s in state.kv if s is not None]
    assert kv and len(context) > 5000
    context_kv = sum(s.nbytes() for s in kv)  # written rows only
    branch = state.clone()
    bb.forward(branch, tok.encode("The special magic number is 4721. " * 3))  # a replay
    bb.generate(branch, tok.encode("What is the special magic number? Answer:"), 8)
    branch_kv = [s for s in branch.kv if s is not None]
    assert sum(held(s) for s in branch_kv) <= 1.5 * context_kv  # doubling would hold 2x
    assert branch.position > state.position and all(s.length == len(context) for s in kv)
