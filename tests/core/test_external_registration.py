"""A package outside memexp registers an architecture, a method and a benchmark with one call each
and runs them by name; unknown names give a one-line "did you mean"; what a method requires of an
architecture comes from the registry, not from the architecture's name."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator

import pytest

import memexp.backbones
import memexp.benchmarks
import memexp.methods
from memexp.benchmarks.base import Benchmark
from memexp.core.compose import load_config
from memexp.core.registry import ARCHS, BENCHES, METHODS, ROUTERS, RegistryError
from memexp.core.schema import BenchConfig, ConfigError, MethodConfig
from memexp.core.types import Example, Question
from memexp.methods.base import Answer, Memory, Method

BUILT = []  # (what, name) of every toy object the run built


def toy_arch(cfg):
    """An architecture of the test's own: memexp's GDN under another name."""
    from memexp.backbones.gdn.model import build

    BUILT.append(("arch", cfg.arch))
    return build(cfg)


@dataclass
class EchoConfig(MethodConfig):
    name: str = "toy_echo"
    reads: int = 1  # how many times the context is read


class Echo(Method):
    """Reads the context `reads` times, then generates from a copy of the state."""

    name = "toy_echo"

    def __init__(self, cfg: EchoConfig) -> None:
        self.cfg = cfg
        BUILT.append(("method", cfg.name))

    def read(self, backbone, context_ids: list[int]) -> Memory:
        state = backbone.init_state()
        for _ in range(self.cfg.reads):
            backbone.forward(state, context_ids)
        return Memory(state=state, context_len=len(context_ids), stats={"reads": self.cfg.reads}, extra=None)

    def answer(self, backbone, memory: Memory, question_ids, question: Question, stop=None) -> Answer:
        ids = backbone.generate(memory.state.clone(), question_ids, question.max_new_tokens, stop)
        return Answer(ids=ids, stats={"reads": self.cfg.reads}, tokens={"question": len(question_ids)})


@dataclass
class CountConfig(BenchConfig):
    name: str = "toy_count"
    examples: int = 2


class Count(Benchmark):
    """`examples` tiny contexts; a prediction scores 100 when it is a string (any generation)."""

    name = "toy_count"

    def __init__(self, cfg: CountConfig) -> None:
        self.cfg = cfg
        BUILT.append(("bench", cfg.name))

    def examples(self, tokenizer) -> Iterator[Example]:
        for i in range(self.cfg.examples):
            q = Question(id="q", prompt=" value?", references=[str(i)], metric="toy", max_new_tokens=2)
            yield Example(id=f"ex{i}", task="toy_task", length=16, context=f"value {i}.", questions=[q])

    def score(self, prediction: str, question: Question) -> float:
        return 100.0 if isinstance(prediction, str) else 0.0


@pytest.fixture
def toys():
    """The three entries registered as an outside package would, removed again afterwards."""
    memexp.backbones.register("toy_arch", toy_arch, recurrent_channels=True)
    memexp.backbones.register("toy_flat", toy_arch)  # no recurrent channels declared
    memexp.methods.register("toy_echo", Echo, schema=EchoConfig)
    memexp.benchmarks.register("toy_count", Count, schema=CountConfig)
    BUILT.clear()
    yield
    from hydra.core.config_store import ConfigStore

    for registry, name in ((ARCHS, "toy_arch"), (ARCHS, "toy_flat"), (METHODS, "toy_echo"), (BENCHES, "toy_count")):
        registry.unregister(name)
    repo = ConfigStore.instance().repo
    for group, name in (("method", "toy_echo"), ("bench", "toy_count")):
        repo.get(group, {}).pop(f"{name}.yaml", None)
        repo.get("schema", {}).get(group, {}).pop(f"{name}.yaml", None)


def test_outside_entries_run_by_name_to_a_summary(toys, tmp_path):
    from memexp.run.runner import run

    cfg = load_config(["backbone=tiny_gdn_random", "backbone.arch=toy_arch", "method=toy_echo", "method.reads=2",
                       "bench=toy_count", "bench.examples=3", f"output_dir={tmp_path}", "progress=false"])
    assert isinstance(cfg.method, EchoConfig) and cfg.method.reads == 2
    assert isinstance(cfg.bench, CountConfig) and cfg.bench.examples == 3
    summary = run(cfg)
    assert BUILT == [("arch", "toy_arch"), ("method", "toy_echo"), ("bench", "toy_count")]
    assert summary["num_questions"] == 3 and summary["complete"]
    records = [json.loads(line) for line in next(tmp_path.rglob("records.jsonl")).read_text().splitlines()]
    assert [r["example_id"] for r in records] == ["ex0", "ex1", "ex2"]
    assert {r["task"] for r in records} == {"toy_task"} and {r["score"] for r in records} == {100.0}
    assert all(r["method_stats"]["reads"] == 2 for r in records)


def test_outside_schema_fields_are_checked(toys):
    with pytest.raises(ConfigError, match=r"^method\.bogus: unknown field; allowed fields are name, reads$"):
        load_config(["method=toy_echo", "method.bogus=1"])


def test_capabilities_come_from_the_registry(toys):
    # the same GDN code, registered without recurrent channels: NoteBank is refused, by meta alone
    with pytest.raises(ConfigError) as err:
        load_config(["backbone=tiny_gdn_random", "backbone.arch=toy_flat", "method=notebank"])
    assert str(err.value) == ("method=notebank: backbone=tiny_gdn_random is an attention backbone (arch toy_flat) "
                              "with no recurrent channels to write or address notes; "
                              "allowed methods here are clean_start, jrt, plain, toy_echo")
    assert load_config(["backbone=tiny_gdn_random", "backbone.arch=toy_arch", "method=notebank"]).method.name == \
        "notebank"


UNKNOWN = [
    (["backbone.arch=gnd"], "backbone.arch='gnd': did you mean gdn? allowed values are gdn, gdn2, llama, mamba2, "
                            "qwen35"),
    (["method=nootbank"], "method=nootbank: did you mean notebank? allowed values are clean_start, infllm, jrt, "
                          "notebank, plain, titan, titan_segmented"),
    (["method.name=jtr"], "method.name='jtr': did you mean jrt? allowed values are clean_start, infllm, jrt, "
                          "notebank, plain, titan, titan_segmented"),
    (["method.router=bm52"], "method.router='bm52': did you mean bm25? allowed values are bge, bm25, embedding, "
                             "native, oracle, random"),
    (["bench=rular"], "bench=rular: did you mean ruler? allowed values are longbench, longbench_v2, longhealth, "
                      "memoryagentbench, quality, ruler"),
    (["bench.name=longbench_v3"], "bench.name='longbench_v3': did you mean longbench_v2? allowed values are longbench, "
                                  "longbench_v2, longhealth, memoryagentbench, quality, ruler"),
]


@pytest.mark.parametrize("overrides,expected", UNKNOWN, ids=[o[0] for o, _ in UNKNOWN])
def test_unknown_name_is_one_line_with_did_you_mean(overrides, expected):
    with pytest.raises(ConfigError) as err:
        load_config(overrides)
    assert str(err.value) == expected


def test_registries_reject_unknown_names_directly():
    for registry, name, close in ((ARCHS, "mamba", "mamba2"), (METHODS, "plane", "plain"),
                                  (ROUTERS, "oracles", "oracle"), (BENCHES, "qualty", "quality")):
        with pytest.raises(RegistryError, match=f"did you mean {close}\\?"):
            registry.get(name)


class FirstNotes:
    """A router of the test's own: always the first `replay_budget` notes."""

    needs_probe = False

    def __init__(self, replay_budget: int) -> None:
        self.replay_budget = replay_budget


def test_an_outside_router_is_chosen_by_name():
    from memexp.methods.notebank.router import build_router

    ROUTERS.register("toy_first", FirstNotes)
    try:
        assert load_config(["backbone=tiny_gdn_random", "method.router=toy_first"]).method.router == "toy_first"
        router = build_router("toy_first", 3, seed=0)
        assert isinstance(router, FirstNotes) and router.replay_budget == 3 and router.name == "toy_first"
    finally:
        ROUTERS.unregister("toy_first")
    with pytest.raises(ConfigError, match="method.router='toy_first': allowed values are bge, bm25"):
        load_config(["method.router=toy_first"])


def test_allowed_values_keep_memexp_order_whatever_was_imported_first():
    """A direct import of one architecture's package registers it before the others; the
    "allowed values" order (memexp's own entries by name) must not depend on that (it did:
    "llama, gdn2, gdn, ...")."""
    from helpers.memexp_process import python

    code = ("import memexp.backbones.attention.model, memexp.methods.notebank.config\n"
            "from memexp.core.registry import ARCHS, METHODS\n"
            "print(','.join(ARCHS.names())); print(','.join(METHODS.names()))")
    run = python("-c", code)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout.split()
    assert out == ["gdn,gdn2,llama,mamba2,qwen35", "clean_start,infllm,jrt,notebank,plain,titan,titan_segmented"]
