"""Every conf/experiment preset composes and validates through memexp.cli.app (no model loads), at every
point of its own sweep, and holds the paper's protocol; every <preset>[.<backbone>].yaml in memexp/report/paper_numbers/
holds the paper's numbers in the format `memexp report` reads.

PAPER below is written from the NoteBank paper (App. C.2, C.3, C.5, D.2; Tables 1-3, 5-8; Figs. 1, 3,
5, 6, 9, 11), not from the presets: which backbones and methods each table or figure compares, and
the NoteBank settings, lengths, sample counts and decoding limits it states.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from memexp.core.compose import group_options, load_config, sweep_jobs
from memexp.core.paths import CONF_DIR
from memexp.core.registry import BENCHES, METHODS
from memexp.core.schema import without_file_checks
from memexp.report.paper import PAPER_NUMBERS

EXPERIMENTS = CONF_DIR / "experiment"
NIAH6 = ["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multiquery", "niah_multivalue"]
RULER_LENGTHS = [4096, 16384, 65536, 262144, 1048576]  # App. C.2: 4K, 16K, 64K, 256K, 1M
LONGBENCH12 = ["narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique", "gov_report",
               "qmsum", "multi_news", "trec", "triviaqa", "samsum"]  # App. C.2
MAB11 = 11  # App. C.2: FactConsolidation-sh/mh x 3 sizes, EventQA x 3, RULER QA1 / QA2
C = {"gdn": 512, "gdn2": 512, "mamba2": 256, "mamba2_8b": 256, "qwen35_9b": 512}  # App. C.3 (Qwen: not stated)
RESET = {"mamba2": 0.0, "mamba2_8b": 0.0}  # App. C.3: lambda = 0 right before replay on Mamba-2

# preset -> what the paper compares (jobs: (backbone, method, router or None)) and its settings;
# "R" maps (backbone, router) -> replay budget; bench fields are checked exactly.
PAPER = {
    "paper_ruler_niah": {  # Fig. 1a / 3 / 6: Plain, JRT, NB-TF top-2 on three 1.3B backbones
        "jobs": {(b, m, None) for b in ("gdn", "gdn2", "mamba2") for m in ("plain", "jrt", "notebank")},
        "R": 2, "bench": {"name": "ruler", "tasks": NIAH6, "lengths": RULER_LENGTHS, "num_samples": 100}},
    "paper_longbench_gdn": {  # Table 1 / 5: top-1 on GDN
        "jobs": {("gdn", m, None) for m in ("plain", "jrt", "notebank")},
        "R": 1, "bench": {"name": "longbench", "tasks": LONGBENCH12, "num_samples": 30, "max_length": None}},
    "paper_longbench_mamba2": {  # Table 1 / 5: top-4 on Mamba-2, C = 256
        "jobs": {("mamba2", m, None) for m in ("plain", "jrt", "notebank")},
        "R": 4, "bench": {"name": "longbench", "tasks": LONGBENCH12, "num_samples": 30, "max_length": None}},
    "paper_memoryagentbench_mamba2_8b": {  # Tables 2 / 6: Plain, clean start, NB-TF top-4 (top-1 by override)
        "jobs": {("mamba2_8b", m, None) for m in ("plain", "clean_start", "notebank")},
        "R": 4, "bench": {"name": "memoryagentbench", "n_tasks": MAB11, "input_length_limit": None}},
    "paper_memoryagentbench_qwen35": {  # Tables 2 / 6: Plain, NB-TF top-4 (top-1 by override)
        "jobs": {("qwen35_9b", m, None) for m in ("plain", "notebank")},
        "R": 4, "bench": {"name": "memoryagentbench", "n_tasks": MAB11, "input_length_limit": None}},
    "paper_longbench_v2_qwen35": {  # Table 2 / App. C.2: top-8, keep what fits, greedy to 32,768, chat
        "jobs": {("qwen35_9b", m, None) for m in ("plain", "notebank")},
        "R": 8, "chat": True,
        "bench": {"name": "longbench_v2", "overlength": "skip", "max_new_tokens": 32768, "max_length": 1048576,
                  "reserve_replay": 8 * 64,
                  "domains": ["Single-Document QA", "Multi-Document QA", "Long-dialogue History Understanding"],
                  "sub_domains": ["User guide QA"]}},
    "paper_routers_ruler": {  # Table 3 / 8: routers at top-1, RULER at 1M
        "jobs": {(b, "notebank", r) for b in ("gdn", "mamba2") for r in ("random", "embedding", "native", "bm25", "bge")},
        "R": 1, "bench": {"name": "ruler", "tasks": NIAH6, "lengths": [1048576], "num_samples": 100}},
    "paper_routers_longbench": {  # Table 3 / 8: routers at top-1, LongBench
        "jobs": {(b, "notebank", r) for b in ("gdn", "mamba2") for r in ("random", "embedding", "native", "bm25", "bge")},
        "R": 1, "bench": {"name": "longbench", "tasks": LONGBENCH12, "num_samples": 30}},
    "paper_oracle_ruler": {  # Fig. 5b: native vs oracle, RULER at 1M
        "jobs": {(b, "notebank", r) for b in ("gdn", "mamba2") for r in ("native", "oracle")},
        "R": 4, "bench": {"name": "ruler", "tasks": NIAH6, "lengths": [1048576], "num_samples": 100}},
    "paper_oracle_longbench": {  # Fig. 5c: native top-1 vs Oracle-1 on four LongBench QA tasks
        "jobs": {(b, "notebank", r) for b in ("gdn", "mamba2") for r in ("native", "oracle")},
        "R": 1, "bench": {"name": "longbench", "tasks": ["hotpotqa", "2wikimqa", "musique", "qasper"],
                          "num_samples": 30}},
    "paper_latency_gdn": {  # Table 7 / Fig. 4c / App. C.5: GDN, C=512, W=2, B=64, R=2, bf16
        "jobs": {("gdn", "notebank", None)}, "R": 2, "dtype": "bfloat16", "bench": {"name": "ruler"}},
    "paper_latency_transformer": {  # Table 7 / Fig. 4c / App. C.5: the Transformer rows; InfLLM top-96, 512-token
        # chunks, 128 initial tokens (Full and SW4K are Plain beside it, run by `memexp latency`), bf16
        "jobs": {("transformer_1b", "infllm", None)}, "dtype": "bfloat16", "bench": {"name": "ruler"},
        "infllm": (96, 512, 128, 1.0)},
    "paper_budgets_gdn": {  # Fig. 11: B in {64, 128, 256} x R in {1, 2, 4}
        "jobs": {("gdn", "notebank", None)}, "grid": {(b, r) for b in (64, 128, 256) for r in (1, 2, 4)},
        "bench": {"name": "ruler", "tasks": NIAH6, "num_samples": 100}},
    "paper_budgets_mamba2": {
        "jobs": {("mamba2", "notebank", None)}, "grid": {(b, r) for b in (64, 128, 256) for r in (1, 2, 4)},
        "bench": {"name": "ruler", "tasks": NIAH6, "num_samples": 100}},
    "paper_lora_budgets_longbench": {  # Fig. 12: NB-LoRA, B x R on LongBench, GDN and Mamba-2
        "jobs": {(b, "notebank", None) for b in ("gdn", "mamba2")},
        "grid": {(b, r) for b in (64, 128, 256) for r in (1, 2, 4)},
        "bench": {"name": "longbench", "tasks": LONGBENCH12, "num_samples": 30}},
}

# Titan-Llama paper (Tables 1-5, Fig. 3; App. A.2, C.1, C.2): full attention is Plain on Llama-3.2-1B-Instruct;
# Titan variants as (memory, later layers local, segment W, test-time batch) (the authors' seg512/1024/2048
# configs: W 512 with batches of 1,024 tokens, 1024 with 1,024, 2048 with 2,048).
LLAMA = "llama32_1b"
FULL, TITAN = (LLAMA, "plain", None), (LLAMA, "titan", None)
SEG = (LLAMA, "titan_segmented", None)  # the "segmented attn." rows: method=titan_segmented
SEGMENTED, MEMORY = (False, False, 512, 1024), (True, False, 512, 1024)
CHUNKS = {(True, False, 512, 1024), (True, False, 1024, 1024), (True, False, 2048, 2048)}
FAMILIES = {"single": ["niah_single_1", "niah_single_2", "niah_single_3"],
            "multikey": ["niah_multikey_1", "niah_multikey_2", "niah_multikey_3"],
            "multiquery": ["niah_multiquery"], "multivalue": ["niah_multivalue"], "fwe_cwe": ["fwe", "cwe"],
            "hotpotqa": ["qa_2"], "squad": ["qa_1"], "vt": ["vt"]}
L4K_32K = [4096, 8192, 16384, 32768]
for k in (1, 2, 3):  # Table 1: S-NIAH-1/2/3 at 8K-32K
    PAPER[f"titan_sniah_{k}"] = {"jobs": {FULL, SEG, TITAN}, "titan": {SEGMENTED, MEMORY}, "bench": {
        "name": "ruler", "tasks": [f"niah_single_{k}"], "lengths": [8192, 16384, 32768], "num_samples": 100}}
for fam in ("single", "multikey", "multiquery", "multivalue", "fwe_cwe", "hotpotqa"):  # Table 2
    PAPER[f"titan_ruler_{fam}"] = {"jobs": {FULL, SEG, TITAN}, "titan": {SEGMENTED, MEMORY}, "bench": {
        "name": "ruler", "tasks": FAMILIES[fam], "lengths": L4K_32K, "num_samples": 100}}
for fam in FAMILIES:  # Table 4 (later layers local) and Table 5 (chunk sizes)
    PAPER[f"titan_local_ruler_{fam}"] = {"jobs": {SEG, TITAN}, "titan": {(False, True, 512, 1024), (True, True, 512, 1024)},
                                         "bench": {"name": "ruler", "tasks": FAMILIES[fam], "lengths": L4K_32K,
                                                   "num_samples": 100}}
    PAPER[f"titan_chunks_{fam}"] = {"jobs": {TITAN}, "titan": CHUNKS, "bench": {
        "name": "ruler", "tasks": FAMILIES[fam], "lengths": L4K_32K, "num_samples": 100}}
for bench in ("quality", "longhealth"):  # Fig. 3 and Table 3
    PAPER[f"titan_{bench}"] = {"jobs": {FULL, SEG, TITAN}, "titan": {SEGMENTED, MEMORY}, "bench": {"name": bench}}
    PAPER[f"titan_local_{bench}"] = {"jobs": {SEG, TITAN}, "titan": {(False, True, 512, 1024), (True, True, 512, 1024)},
                                     "bench": {"name": bench}}
    PAPER[f"titan_chunks_{bench}"] = {"jobs": {TITAN}, "titan": CHUNKS, "bench": {"name": bench}}
PAPER["titan_quality"]["bench"]["split"] = "dev"  # the paper's +-1.08 is the standard error of the 2,086 dev questions
# Evaluated as trained (issue 42): QuALITY in the authors' SFT format (sft_kvwrite_quality_mc.py), LongHealth
# through Llama's chat template with the official system prompt (the gold-SFT data went through
# apply_chat_template, train_datasets.py)
for prefix in ("titan_", "titan_local_", "titan_chunks_"):
    PAPER[f"{prefix}quality"]["bench"]["prompt"] = "titan_sft"
    PAPER[f"{prefix}longhealth"]["chat"] = True
NOT_PAPER = {"tiny_gdn_lengths", "tiny_gdn_words_lengths", "tiny_titan", "tiny_notebank_lora",
             "tiny_infllm"}  # memexp's own tiny-model tables


def presets() -> list[str]:
    return group_options("experiment")


def jobs(name: str, tmp_path: Path) -> list:
    """The validated RunConfig of every point of the preset's own sweep (hydra.sweeper.params)."""
    params = OmegaConf.load(EXPERIMENTS / f"{name}.yaml").get("hydra", {}).get("sweeper", {}).get("params", {})
    points = sweep_jobs([f"experiment={name}", *(f"{k}={v}" for k, v in params.items())])
    # values only: a checkpoint that exists only after a conversion script (mamba2_8b) or an adapter
    # trained first (NB-LoRA) is looked at when a run starts (tests/cli/test_inspect_without_files.py)
    with without_file_checks():
        return [load_config(point) for point in points]


def test_every_preset_is_covered_by_the_table_from_the_paper():
    assert set(presets()) == set(PAPER) | NOT_PAPER


@pytest.mark.parametrize("name", sorted(PAPER))
def test_preset_header_states_command_source_and_gpu_time(name):
    header = []
    for line in (EXPERIMENTS / f"{name}.yaml").read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    text = "\n".join(header)
    assert any(f"experiment={name}" in line and ("python -m memexp run" in line or "python -m memexp latency" in line)
               for line in header[:5]), "states its command at the top"
    assert re.search(r"(Table|Fig\.) \d", text), "names the paper's table or figure"
    assert "GPU time" in text and "ESTIMATE" in text and "H100" in text


@pytest.mark.parametrize("name", sorted(n for n in PAPER if n.startswith("titan_")))
def test_every_titan_preset_states_its_evaluation_format(name):
    header = (EXPERIMENTS / f"{name}.yaml").read_text().split("\ndefaults:")[0]
    assert "# Format: " in header


@pytest.mark.parametrize("name", sorted(PAPER))
def test_preset_composes_at_every_sweep_point_with_the_papers_settings(name, tmp_path):
    want = PAPER[name]
    cfgs = jobs(name, tmp_path)
    routed = any(router is not None for _, _, router in want["jobs"])
    seen = {(c.backbone.name, c.method.name, c.method.router if routed else None) for c in cfgs}
    assert seen == want["jobs"]
    grid, titan = set(), set()
    for c in cfgs:
        bench = c.bench
        for key, value in want["bench"].items():
            if key == "n_tasks":
                assert len(bench.tasks) == value
            else:
                assert getattr(bench, key) == value, f"bench.{key}"
        assert c.backbone.chat is want.get("chat", False)
        if "dtype" in want:
            assert c.backbone.dtype == want["dtype"]
        m = c.method
        if m.name == "notebank":
            assert (m.chunk_size, m.write_budget, m.window, m.tail, m.address_dim) == (C[c.backbone.name], 2, 48, 32, 16)
            assert m.rescale == RESET.get(c.backbone.name)
            assert (m.note_separator, m.replay_suffix) == ("", "")  # Eq. 6: notes back to back, then the question
            if "grid" in want:
                grid.add((m.span_budget, m.replay_budget))
            else:
                assert (m.span_budget, m.replay_budget) == (64, want["R"])
        elif m.name == "clean_start":
            assert m.rescale == 0.0  # App. C.3: the state reset, no replay
        elif m.name == "infllm":
            assert (m.topk, m.chunk_size, m.n_init, m.distance_scale) == want["infllm"]
            assert c.backbone.prefill_chunk == 512 and c.backbone.window is None
        elif m.name in ("titan", "titan_segmented"):
            assert (m.layers, m.max_lr, m.rope_memory, m.value_residual) == (4, 1.0, True, True)  # layers 0-3
            titan.add((m.memory, m.local_later_layers, m.segment_length, m.test_batch))
        else:
            assert m.rescale is None  # the main text's unmodified baselines
    assert grid == want.get("grid", set())
    assert titan == want.get("titan", set())


def test_a_command_line_value_replaces_the_presets_sweep():
    points = sweep_jobs(["experiment=paper_routers_ruler", "backbone=gdn,mamba2",
                         "++method.router=random,embedding,native,bm25", "++method.router=bm25"])
    assert len(points) == 2  # the router given on the command line replaces the four of the sweep


def test_the_r1_rows_of_table_6_are_one_override_away(tmp_path):
    cfg = load_config(["experiment=paper_memoryagentbench_mamba2_8b", "method=notebank", "method.replay_budget=1",
                       f"backbone.pretrained={tmp_path}"])  # the converted 8B checkpoint's folder
    assert (cfg.method.replay_budget, cfg.method.chunk_size, cfg.method.rescale) == (1, 256, 0.0)


def paper_files() -> list[Path]:
    return sorted(PAPER_NUMBERS.glob("*.yaml"))


def test_every_paper_preset_has_the_papers_numbers_beside_it():
    named = {p.name.split(".")[0] for p in paper_files()}
    assert named == set(PAPER)


@pytest.mark.parametrize("path", paper_files(), ids=lambda p: p.name)
def test_paper_numbers_file_parses_and_names_its_source(path):
    data = yaml.safe_load(path.read_text())
    assert list(data) == ["source", "bench", "backbone", "rows"]  # the order memexp report reads
    assert re.fullmatch(r"(Table|Fig\.) \d+[a-z]?", data["source"])
    preset, *middle, _ = path.name.split(".")
    assert data["bench"] in set(BENCHES.names()) | {"latency"}
    assert data["backbone"] in group_options("backbone")
    if middle:  # <preset>.<backbone>.yaml for a preset that sweeps backbones
        assert middle == [data["backbone"]]
    assert data["source"] in (EXPERIMENTS / f"{preset}.yaml").read_text()  # the preset's header names it
    assert data["rows"]
    for label, scores in data["rows"].items():
        method, *overrides = label.split(" ")
        # NB-LoRA: the paper's, not memexp's; external:<system>: a system memexp does not run, quoted as
        # an external reference (Memory Caching, MARCH, LaCT, T-E2E)
        assert method in METHODS or method == "notebank_lora" or method.startswith("external:"), label
        assert all(re.fullmatch(r"(method|backbone)\.\w+=\S+", o) for o in overrides), label
        assert scores and all(isinstance(v, (int, float)) and 0 <= v for v in scores.values()), label
        assert all(isinstance(k, (str, int)) for k in scores), label
