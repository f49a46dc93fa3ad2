"""The embedded InfLLM demonstration (experiment=tiny_infllm): it composes for every method it compares
and runs through `python -m memexp run` on the shipped tiny Llama, with InfLLM's figures in the records.
(Its table, on 50 examples per length and two seeds: docs/infllm.md.)"""

from helpers.memexp_process import records, run_preset

from memexp.core.compose import load_config
from memexp.methods.infllm.config import InfLLMConfig

PRESET = "tiny_infllm"


def test_the_preset_compares_full_attention_a_window_and_infllm_at_1x_to_4x_the_training_length():
    infllm = load_config([f"experiment={PRESET}", "method=infllm"])
    assert infllm.method == InfLLMConfig(block_size=32, n_init=32, n_local=512, topk=8, repr_topk=4,
                                         max_cached_block=16, exc_block_size=64, chunk_size=512)
    assert infllm.bench.lengths == [1024, 2048, 3072, 4096] and infllm.bench.tasks == ["niah_single_1"]
    assert infllm.backbone.name == "tiny_llama_niah" and infllm.backbone.window is None
    window = load_config([f"experiment={PRESET}", "method=plain", "backbone.window=512"])
    assert window.method.name == "plain" and window.backbone.window == 512 == infllm.method.n_local


def test_infllm_runs_the_preset_and_records_its_host_kv(tmp_path):
    folder = run_preset(tmp_path, PRESET, "infllm", "bench.lengths=[2048]", "bench.num_samples=2")
    rows = records(folder)
    assert len(rows) == 2
    for r in rows:
        stats = r["method_stats"]
        # a block of the tiny Llama: keys and values x 2 KV heads x 32 tokens x 32 wide x 4 bytes (fp32)
        assert stats["infllm_blocks"] >= 2 * 40  # 2 layers x about (2048 - 32 - 512) / 32 blocks
        assert stats["infllm_host_kv_bytes"] == stats["infllm_blocks"] * 2 * 2 * 32 * 32 * 4
