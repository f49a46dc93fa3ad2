"""Each training recipe for a few deterministic CPU steps on its test-sized config: the loss of
every backward pass and a checksum of what the run saved. tests/training/test_loop_trajectories.py
compares them with the values the recipes' own loops gave before they shared one loop.

    PYTHONPATH=$PWD python -m tests.training.loss_trajectories [recipe ...]

prints one `recipe: (losses, checksum)` line per recipe. The losses are read where every loop
hands them to autograd (`Tensor.backward`), so the probe is the same for any loop.
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import load_file

from memexp.cli.train import main
from tests.training.titan_data import write_sources

STAGES_GDN = ("[{name: a, steps: 12, batch_size: 2, lr: 3.0e-3, min_lines: 1, max_lines: 2, note_fraction: 0.5},"
              " {name: b, steps: 2, batch_size: 1, lr: 1.0e-3, question: short, min_lines: 1, max_lines: 1}]")
STAGES_WORDS = ("[{name: c, steps: 2, batch_size: 2, lr: 1.0e-3, min_tokens: 64, max_tokens: 96, form: copy},"
                " {name: s, steps: 3, batch_size: 2, lr: 1.0e-3, min_tokens: 128, max_tokens: 256,"
                " question_weight: 0.5, lens_layer: 1, lens_weight: 0.3, tied_qk_layers: [1],"
                " centered_qk_layers: [1]}]")
STAGES_LLAMA = "[{name: s, steps: 3, batch_size: 2, lr: 1.0e-3, question: ruler, min_lines: 1, max_lines: 2}]"
TITAN_TINY = ["backbone=tiny_llama_random", "backbone_fields={dtype: float32, device: cpu}",
              "method={layers: 2, segment_length: 16, test_batch: 32}", "sequence_length=128", "wandb=none",
              "threads=1", "shuffle_buffer=4"]
TITAN_STAGES = ("stages=[{name: pre, data: pretrain_mix, total_tokens: 1024, batch_size: 2, micro_batch_size: 1, "
                "lr: 1.0e-2, min_lr: 1.0e-3, warmup_start_lr: 1.0e-3, warmup_steps: 1, save_every: 1}, "
                "{name: sft, data: gold_sft, total_tokens: 1024, batch_size: 2, micro_batch_size: 2, lr: 1.0e-2, "
                "min_lr: 1.0e-3, warmup_start_lr: 1.0e-3, warmup_steps: 1, save_every: 3, longalign_examples: 3, "
                "loongrl_examples: 2}]")


def arguments(recipe: str, root: Path) -> list[str]:
    """The command line of `recipe`'s short run, writing under `root`."""
    out = f"output={root / recipe}"
    if recipe == "tiny_gdn":
        return ["recipe=tiny_gdn", out, f"stages={STAGES_GDN}", "eval_samples=0", "threads=1",
                "model.hidden_size=32", "model.head_dim=16"]
    if recipe == "tiny_gdn_words":
        return ["recipe=tiny_gdn_words", out, f"stages={STAGES_WORDS}", "eval_samples=0", "threads=1",
                "tokenizer_examples=20", "model.hidden_size=32", "model.head_dim=8", "model.num_hidden_layers=2",
                "induction_layers=1", "lexical_heads=1"]
    if recipe == "tiny_llama_niah":
        return ["recipe=tiny_llama_niah", out, f"stages={STAGES_LLAMA}", "eval_samples=0", "threads=1",
                "copy.steps=3", "copy.batch_size=2", "model.hidden_size=32", "model.intermediate_size=64"]
    if recipe == "notebank_lora":
        return ["recipe=notebank_lora", "backbone=tiny_gdn", out, "data.lengths=[1024]",
                "data.tasks=[niah_multikey_3]", "data.samples=4", "data.examples=4", "accumulate=2", "steps=4",
                "checkpoint_every=2", "log_every=100", "threads=1", "lr=5e-3", "schedule=cosine", "warmup=1"]
    if recipe == "titan_llama":
        paths = write_sources(root / "data")
        return ["recipe=titan_llama", out, *TITAN_TINY, TITAN_STAGES, *(f"{k}={v}" for k, v in paths.items())]
    if recipe == "tiny_titan":  # on tiny_llama_niah's short run (run it first)
        return ["recipe=tiny_titan", out, f"backbone_fields.pretrained={root / 'tiny_llama_niah'}", "threads=1",
                "stages=[{name: niah, data: niah, total_tokens: 8192, batch_size: 2, micro_batch_size: 1}]"]
    raise ValueError(recipe)


RECIPES = ("tiny_gdn", "tiny_gdn_words", "tiny_llama_niah", "notebank_lora", "titan_llama", "tiny_titan")


@contextmanager
def backward_losses(into: list[float]):
    """Record the value of every scalar that autograd is asked to differentiate."""
    original = torch.Tensor.backward

    def record(self, *args, **kwargs):
        into.append(self.item())
        return original(self, *args, **kwargs)

    torch.Tensor.backward = record
    try:
        yield
    finally:
        torch.Tensor.backward = original


def checksum(folder: Path) -> float:
    """Sum of |x| over every tensor the run saved (float64): a summary of the trained weights."""
    total = 0.0
    for path in sorted(folder.rglob("*.safetensors")):
        total += sum(t.double().abs().sum().item() for t in load_file(str(path)).values())
    return total


def trajectory(recipe: str, root: Path) -> tuple[list[float], float]:
    """(the loss of every backward pass, checksum of the saved tensors) of `recipe`'s short run."""
    losses: list[float] = []
    with backward_losses(losses):
        rc = main(arguments(recipe, root))
    assert rc == 0, recipe
    return losses, checksum(root / recipe)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[1:] or RECIPES:
            print(f"{name}: {trajectory(name, Path(tmp))!r}", flush=True)
