"""CPU prefill throughput of memexp's backbones against transformers' implementation of the
same tiny config, in one process (same weights, same tokens, fp32).

For each architecture a random transformers model is saved and memexp loads that directory,
so both run identical weights; the script prints tokens/s for each, their ratio
(memexp / transformers) and the largest difference of the last-position logits.
transformers would pick FLA's GPU kernels for Qwen3.5 whenever FLA imports, so FLA is hidden
from this process (memexp needs it only on CUDA). GDN-2 has no transformers implementation:
its row reports memexp alone.

    python scripts/bench/backbones.py                       # all, 2048 tokens, torch's threads
    python scripts/bench/backbones.py --arch mamba2 --tokens 4096 --threads 1
"""

from __future__ import annotations

import sys

sys.modules["fla"] = None  # transformers' Qwen3.5 would otherwise dispatch to FLA's GPU-only kernels

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from memexp.backbones import load_backbone  # noqa: E402
from memexp.backbones.tokenizer import ByteTokenizer  # noqa: E402

VOCAB = 4096


def hf_mamba2():
    from transformers import Mamba2Config, Mamba2ForCausalLM

    return Mamba2ForCausalLM(Mamba2Config(hidden_size=256, num_hidden_layers=4, num_heads=8, head_dim=64, state_size=64,
                                          n_groups=2, vocab_size=VOCAB, chunk_size=256, expand=2))


def hf_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                                        intermediate_size=688, vocab_size=VOCAB, attn_implementation="sdpa"))


def hf_qwen35():
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    return Qwen3_5ForCausalLM(Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, linear_key_head_dim=32, linear_value_head_dim=32, linear_num_key_heads=4,
        linear_num_value_heads=8, attn_implementation="sdpa"))


REFERENCES = {"mamba2": hf_mamba2, "llama": hf_llama, "qwen35": hf_qwen35}
GDN2_MODEL = dict(hidden_size=256, num_hidden_layers=4, num_heads=4, head_dim=64, intermediate_size=688, vocab_size=VOCAB)


def best_seconds(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


@torch.no_grad()
def bench(arch: str, tokens: int, repeats: int) -> dict:
    ids = torch.randint(0, VOCAB, (tokens,), generator=torch.Generator().manual_seed(0))
    if arch == "gdn2":
        memexp = load_backbone({"name": "bench_gdn2", "arch": "gdn2", "tokenizer": "byte", "device": "cpu",
                                "prefill_chunk": tokens, "model": GDN2_MODEL})
        ours = best_seconds(lambda: memexp.forward(memexp.init_state(), ids), repeats)
        return {"arch": arch, "memexp": tokens / ours, "transformers": None, "ratio": None, "max_diff": None}
    model = REFERENCES[arch]().eval()
    with tempfile.TemporaryDirectory() as directory:
        model.save_pretrained(directory)
        ByteTokenizer().save(directory)
        memexp = load_backbone({"name": f"bench_{arch}", "arch": arch, "pretrained": directory, "device": "cpu",
                                "dtype": "float32", "prefill_chunk": tokens})
    theirs = best_seconds(lambda: model(ids[None], use_cache=False, logits_to_keep=1), repeats)
    ours = best_seconds(lambda: memexp.forward(memexp.init_state(), ids), repeats)
    diff = (memexp.forward(memexp.init_state(), ids) - model(ids[None], use_cache=False, logits_to_keep=1).logits[0, -1]).abs().max()
    return {"arch": arch, "memexp": tokens / ours, "transformers": tokens / theirs, "ratio": theirs / ours,
            "max_diff": float(diff)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="*", default=["mamba2", "llama", "qwen35", "gdn2"],
                        choices=["mamba2", "llama", "qwen35", "gdn2"])
    parser.add_argument("--tokens", type=int, default=2048, help="prefill length (one chunk)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per implementation (best is kept)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"prefill of {args.tokens} tokens, fp32 CPU, {torch.get_num_threads()} threads, best of {args.repeats}")
    print(f"{'arch':<8} {'memexp tok/s':>13} {'transformers tok/s':>19} {'ratio':>7} {'max |dlogit|':>13}")
    for arch in args.arch:
        r = bench(arch, args.tokens, args.repeats)
        ref = f"{r['transformers']:19.0f}" if r["transformers"] else f"{'n/a':>19}"
        ratio = f"{r['ratio']:7.2f}" if r["ratio"] else f"{'n/a':>7}"
        diff = f"{r['max_diff']:13.2e}" if r["max_diff"] is not None else f"{'n/a':>13}"
        print(f"{arch:<8} {r['memexp']:13.0f} {ref} {ratio} {diff}", flush=True)


if __name__ == "__main__":
    main()
