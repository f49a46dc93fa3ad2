"""Each method's read identity (memexp.methods.read_identity), proved on a tiny backbone: changing
an answer field leaves `read`'s memory (state tensors, payload, figures) equal, changing any other
field changes it, and `Method.read_shared` gives every method the memory its own `read` gives.

A field missing from both tables below fails `test_every_field_is_checked`: a new field is either
shown to leave the read unchanged (and may then be declared an answer field) or shown to change it.
"""

from __future__ import annotations

from dataclasses import fields, replace
from functools import lru_cache
from pathlib import Path

import pytest
import torch

import memexp
from memexp.backbones import backbone_config, load_backbone
from memexp.core.registry import METHODS
from memexp.methods import build_method
from memexp.methods.read_identity import answer_fields, read_identity, writer_fields

LORA = Path(memexp.__file__).parent / "assets" / "tiny_gdn_words_lora"

# method -> (backbone, base config overrides, {answer field: other value}, {read field: other value})
CASES = {
    "notebank": ("tiny_gdn_words",
                 dict(chunk_size=64, span_budget=8, window=4, tail=16, address_dim=8),
                 dict(replay_budget=4, router="bm25", router_seed=3, router_model="someone/encoder",
                      router_query_instruction="", rescale=0.5, note_separator="\n", replay_suffix=" Q:",
                      adapter=str(LORA / "notebank")),
                 dict(chunk_size=96, write_budget=1, span_budget=5, window=2, tail=0, address_dim=4, address_seed=1,
                      layers=[0], write_tail=True)),
    "plain": ("tiny_gdn_words", {}, dict(rescale=0.5, adapter=str(LORA / "plain")), {}),
    "clean_start": ("tiny_gdn_words", {}, dict(rescale=0.5, adapter=str(LORA / "plain")), {}),
    "jrt": ("tiny_gdn_words", {}, dict(separator=" | ", rescale=0.5), {}),
    # every field of Titan and InfLLM is read-side (their layers write while the context is read);
    # a few are shown to change the read, the others are read-side by their registration alone
    "titan": ("tiny_llama_random", dict(layers=2, segment_length=64, test_batch=64),
              {}, dict(segment_length=32, memory=False, max_lr=0.1, layers=1)),
    "infllm": ("tiny_llama_random", dict(block_size=16, n_init=16, n_local=64, exc_block_size=32, chunk_size=64,
                                         topk=2, max_cached_block=8),
               {}, dict(n_local=32, topk=1, block_size=8, n_init=8)),
}
CONTEXT = 333  # tokens: five 64-token chunks and a tail, several 16-token blocks


@lru_cache(maxsize=None)
def backbone(name: str):
    return load_backbone(backbone_config(name))


def context(name: str) -> list[int]:
    """Random words in sentences of 5 to 14 tokens (NoteBank's spans end at sentence ends)."""
    g = torch.Generator().manual_seed(0)
    tok = backbone(name).tokenizer
    vocab = backbone(name).config.vocab_size
    period = tok.encode(".")[-1]
    ids = torch.randint(4, vocab, (CONTEXT,), generator=g).tolist()
    at = 0
    while at < CONTEXT:
        at += int(torch.randint(5, 15, (1,), generator=g))
        if at < CONTEXT:
            ids[at] = period
    return ids


def config(method: str, **changes):
    base = CASES[method][1]
    return replace(METHODS.get(method).load_schema()(), **{**base, **changes})


def tensors(obj, prefix: str = "", seen: set | None = None) -> list[tuple[str, object]]:
    """Every tensor and plain value reachable from a memory's state or payload, by path."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        return [(prefix, obj.detach().cpu())]
    if isinstance(obj, (int, float, str, bool, type(None))):
        return [(prefix, obj)]
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, dict):
        items = [(str(k), v) for k, v in obj.items() if k != "derived"]
    elif isinstance(obj, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(obj)]
    elif hasattr(obj, "__dict__"):
        items = [(k, v) for k, v in vars(obj).items() if k != "derived"]
    else:
        return [(prefix, repr(obj))]
    return [t for k, v in items for t in tensors(v, f"{prefix}.{k}", seen)]


def equal(a, b) -> bool:
    ta, tb = tensors(a), tensors(b)
    if [k for k, _ in ta] != [k for k, _ in tb]:
        return False
    for (_, x), (_, y) in zip(ta, tb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


def memory_of(method: str, cfg):
    """What `read` keeps for `cfg`: the state, the payload and the method's figures (on a backbone
    of its own: Titan and InfLLM replace its layers, a read adapter is loaded onto it)."""
    name = CASES[method][0]
    model = load_backbone(backbone_config(name))
    m = build_method(cfg)
    m.prepare(model)
    memory = m.read(model, context(name))
    return {"state": memory.state, "extra": memory.extra, "stats": memory.stats, "length": memory.context_len}


@pytest.mark.parametrize("method", list(CASES))
def test_every_field_is_checked(method):
    """Each schema field is in the answer table or the read table (or, for methods that declare
    no answer fields, read-side by registration), and the answer table is the declaration."""
    _, _, answer, read = CASES[method]
    schema = METHODS.get(method).load_schema()
    names = {f.name for f in fields(schema)} - {"name"}
    assert set(answer) == set(answer_fields(method))
    assert set(writer_fields(method)) <= set(read)
    if answer_fields(method) or writer_fields(method):
        assert names == set(answer) | set(read), names ^ (set(answer) | set(read))


@pytest.mark.parametrize("method,field", [(m, f) for m, case in CASES.items() for f in case[2]])
def test_an_answer_field_leaves_the_read_unchanged(method, field):
    value = CASES[method][2][field]
    base, changed = config(method), config(method, **{field: value})
    assert read_identity(base) == read_identity(changed)
    assert equal(memory_of(method, base), memory_of(method, changed))


@pytest.mark.parametrize("method,field", [(m, f) for m, case in CASES.items() for f in case[3]])
def test_a_read_field_changes_the_read(method, field):
    value = CASES[method][3][field]
    base, changed = config(method), config(method, **{field: value})
    assert read_identity(base) != read_identity(changed)
    assert not equal(memory_of(method, base), memory_of(method, changed))


def test_plain_and_its_clean_start_share_one_read():
    """One implementation under two names: equal read identities."""
    assert read_identity(config("plain")) == read_identity(config("clean_start"))
    assert read_identity(config("plain")) != read_identity(config("jrt"))


def test_read_shared_gives_each_writer_its_own_reads_memory():
    """NoteBank's one pass for several writers: each memory equals that writer's own read."""
    name = CASES["notebank"][0]
    cfgs = [config("notebank"), config("notebank", span_budget=5, write_budget=1), config("notebank", layers=[0]),
            config("notebank", address_dim=4, address_seed=1, tail=0, write_tail=True)]
    methods = [build_method(cfg) for cfg in cfgs]
    for m in methods:
        m.prepare(backbone(name))
    shared = type(methods[0]).read_shared(backbone(name), context(name), methods)
    for m, memory in zip(methods, shared):
        alone = m.read(backbone(name), context(name))
        assert equal({"state": memory.state, "extra": memory.extra, "stats": memory.stats},
                     {"state": alone.state, "extra": alone.extra, "stats": alone.stats})
    assert len({len(mem.extra) for mem in shared}) > 1  # the writers did write different archives
