"""`Backbone.train_forward`: the batched, grad-enabled forward of every architecture gives the
logits the stateful inference forward gives for each prefix, and its gradients reach the weights."""

import pytest
import torch

from memexp.backbones import load_backbone

TINY = ["tiny_gdn_random", "tiny_gdn2_random", "tiny_mamba2_random", "tiny_qwen35_random", "tiny_llama_random"]
POSITIONS = (0, 6, 7, 16, 29, 39)  # inside the conv window, at and across inference chunk ends (chunk 8)


def tiny(name: str, window: int | None = None):
    """The YAML's tiny model with weights 5x the init std (so logits depend visibly on the
    context) and inference chunks of 8, so inference crosses chunk ends where training does not."""
    bb = load_backbone(name)
    bb.prefill_chunk = 8
    if window is not None:
        bb.window = window
    with torch.no_grad():
        for p in bb.model.parameters():
            if p.dim() == 2:
                p.mul_(5)
    return bb


def batch(n_rows=2, length=40):
    return torch.randint(0, 256, (n_rows, length), generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize("name, window", [(n, None) for n in TINY] + [("tiny_llama_random", 8),
                                                                       ("tiny_qwen35_random", 8)])
def test_training_logits_equal_inference_logits_of_each_prefix(name, window):
    bb = tiny(name, window)
    ids = batch()
    logits = bb.train_forward(ids)
    assert logits.shape == (2, 40, 258) and logits.requires_grad
    for row in range(2):
        for t in POSITIONS:
            expected = bb.forward(bb.init_state(), ids[row, :t + 1])
            torch.testing.assert_close(logits[row, t].float(), expected, atol=1e-5, rtol=1e-5)
    # the comparison has teeth: logits move with the context by far more than the tolerance
    assert (logits[0, 39] - logits[0, 38]).abs().max() > 1e-2
    assert (logits[0, 39] - logits[1, 39]).abs().max() > 1e-2


@pytest.mark.parametrize("name", TINY)
def test_gradients_reach_every_parameter(name):
    """Through every op's training form, across the chunk ends of the chunked ones (130 tokens: two
    chunks of 64 and a partial third), every parameter gets a finite, non-zero gradient."""
    bb = tiny(name)
    bb.model.zero_grad(set_to_none=True)
    bb.train_forward(batch(length=130)).float().logsumexp(-1).mean().backward()
    params = dict(bb.model.named_parameters())
    assert any(p.dim() == 2 for p in dict(bb.layers[0].named_parameters()).values())
    for n, p in params.items():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, n


def test_train_forward_rejects_one_dimensional_ids():
    bb = load_backbone("tiny_gdn_random")
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        bb.train_forward(torch.arange(5))
