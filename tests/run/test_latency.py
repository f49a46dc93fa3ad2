"""The latency protocol of App. C.5, checked by instrumenting what runs inside the timed region."""

import json

import pytest

from memexp.backbones import load_backbone
from memexp.cli.latency import main
from memexp.methods import build_method
from memexp.methods.base import Method
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.plain.config import PlainConfig
from memexp.run.latency import LatencyInput, PeakMemory, measure_latency, ratio_rows, synthetic_inputs


@pytest.fixture(scope="module")
def backbone():
    return load_backbone("tiny_gdn_random")


class Recorder(Method):
    """Passes calls through to a real method and logs them."""

    def __init__(self, inner: Method, events: list) -> None:
        self.inner, self.name, self.events = inner, inner.name, events

    def read(self, backbone, context_ids):
        memory = self.inner.read(backbone, context_ids)
        self.events.append(("read", self.name, len(context_ids), id(memory)))
        return memory

    def answer(self, backbone, memory, question_ids, question, stop=None):
        answer = self.inner.answer(backbone, memory, question_ids, question, stop)
        self.events.append(("answer", self.name, id(memory), question.max_new_tokens, stop, len(answer.ids),
                            answer.tokens.get("replay", 0)))
        return answer


def test_timed_region_holds_exactly_one_complete_run(backbone, monkeypatch):
    """Per input: one warm-up per method outside timing, then 3 timed runs per method in
    alternating order; each timed region holds one read (archive rebuilt: a fresh memory every
    run) and one answer of 32 tokens with stop=[] that uses that memory; the first
    tokenisation happens before any of it. The figure is the mean of per-input medians.
    (Memory identity is checked per region only: ids may repeat once a memory is freed.)"""
    events: list = []
    tok = backbone.tokenizer
    encode = tok.encode
    monkeypatch.setattr(tok, "encode", lambda *a, **k: events.append(("encode",)) or encode(*a, **k))
    inputs = [LatencyInput(f"in{i}", encode("x. " * 100 * (i + 1), add_bos=True), encode("Where is x?"))
              for i in range(2)]
    durations = iter([3.0, 1.0, 8.0, 2.0, 5.0, 6.0, 4.0, 9.0, 7.0, 2.0, 1.0, 3.0])
    clock_state = {"inside": False, "now": 0.0}

    def clock():
        if clock_state["inside"]:
            clock_state["now"] += next(durations)
        events.append("stop" if clock_state["inside"] else "start")
        clock_state["inside"] = not clock_state["inside"]
        return clock_state["now"]

    methods = {"plain": Recorder(build_method(PlainConfig()), events),
               "notebank": Recorder(build_method(NoteBankConfig(chunk_size=64)), events)}
    res = measure_latency(backbone, methods, inputs, new_tokens=32, repeats=3, clock=clock)

    regions, outside, current = [], [], None
    for e in events:
        if e == "start":
            current = []
        elif e == "stop":
            regions.append(current)
            current = None
        else:
            (outside if current is None else current).append(e)
    assert len(regions) == 2 * 2 * 3
    order = []
    for region in regions:
        calls = [e for e in region if e != ("encode",)]
        if calls[0][1] == "plain":  # the harness tokenises nothing; NoteBank may (it stays timed, App. C.5)
            assert calls == region
        (read, name, _, memory), answer = calls
        assert read == "read" and answer[:5] == ("answer", name, memory, 32, []) and answer[5] == 32
        order.append(name)
    assert order == ["notebank", "plain", "plain", "notebank", "notebank", "plain",
                     "plain", "notebank", "notebank", "plain", "plain", "notebank"]
    assert [e[1] for e in outside if e[0] == "read"] == ["plain", "notebank", "notebank", "plain"]  # warm-ups
    assert any(e[6] > 0 for r in regions for e in r if e[0] == "answer" and e[1] == "notebank")  # replay was timed
    # durations by region: in0 nb 3, pl 1 | pl 8, nb 2 | nb 5, pl 6; in1 pl 4, nb 9 | nb 7, pl 2 | pl 1, nb 3
    assert res["methods"]["plain"]["runs"] == {"in0": [1.0, 8.0, 6.0], "in1": [4.0, 2.0, 1.0]}
    assert res["methods"]["plain"]["seconds"] == pytest.approx((6.0 + 2.0) / 2)
    assert res["methods"]["notebank"]["seconds"] == pytest.approx((3.0 + 7.0) / 2)


def test_measures_plain_and_notebank_on_the_tiny_backbone(backbone):
    """A real measurement on CPU: positive times, peak RSS, NoteBank / Plain ratios."""
    methods = {"plain": build_method(PlainConfig()), "notebank": build_method(NoteBankConfig(chunk_size=64))}
    res = measure_latency(backbone, methods, synthetic_inputs(backbone.tokenizer, 400), new_tokens=32, repeats=3)
    assert res["memory"] in ("cpu_peak_rss", "cpu_peak_rss_since_start")
    for m in ("plain", "notebank"):
        assert res["methods"][m]["seconds"] > 0 and res["methods"][m]["peak_bytes"] > 0
        assert all(len(v) == 3 for v in res["methods"][m]["runs"].values())
    (row,) = ratio_rows({400: res})
    assert row["latency_ratio"] == pytest.approx(res["methods"]["notebank"]["seconds"] / res["methods"]["plain"]["seconds"])


def test_synthetic_inputs_have_the_exact_length(backbone):
    (inp,) = synthetic_inputs(backbone.tokenizer, 777)
    assert len(inp.context_ids) == 777 and inp.question_ids


def test_peak_memory_on_cpu_resets_between_runs():
    mem = PeakMemory("cpu")
    if mem.kind != "cpu_peak_rss":
        pytest.skip("/proc/self/clear_refs is not writable here")
    big = bytearray(200 * 2**20)
    for i in range(0, len(big), 4096):
        big[i] = 1
    high = mem.peak()
    del big
    mem.reset()
    assert mem.peak() < high - 100 * 2**20


def test_cli_prints_ratios_as_json(capsys):
    assert main(["lengths=300", "repeats=1", "inputs=synthetic", "method.chunk_size=64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert row["length"] == 300 and row["latency_ratio"] > 0 and row["peak_ratio"] > 0


def test_infllm_times_the_transformer_rows_each_on_its_own_backbone(capsys):
    """Table 7's Transformer rows: Full, SW<sw_window> and InfLLM, with InfLLM's host KV."""
    args = ["backbone=tiny_llama_random", "method=infllm", "lengths=200", "repeats=1", "new_tokens=2",
            "inputs=synthetic", "sw_window=32", "method.block_size=8", "method.n_init=4", "method.n_local=32",
            "method.topk=2", "method.exc_block_size=16", "method.chunk_size=64", "method.max_cached_block=4", "--json"]
    assert main(args) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["length"] == 200 and row["window"] == 32
    assert all(row[f"{m}_seconds"] > 0 and row[f"{m}_peak_bytes"] > 0 for m in ("full", "sw", "infllm"))
    # a block of tiny_llama_random: keys and values x 2 KV heads x 8 tokens x 16 wide x 4 bytes (fp32)
    assert row["infllm_blocks"] > 0 and row["infllm_host_kv_bytes"] == row["infllm_blocks"] * 2 * 2 * 8 * 16 * 4
