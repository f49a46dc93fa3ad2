"""The GDN backbone's batched training forward: same numbers as the backbone, differentiable."""

import torch

from memexp.backbones import load_backbone

SMALL = {"name": "t", "arch": "gdn", "tokenizer": "byte", "seed": 3,
         "model": {"hidden_size": 32, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 16, "vocab_size": 258}}


def test_each_row_matches_the_backbone_forward_from_a_fresh_state():
    bb = load_backbone(SMALL)
    ids = torch.randint(0, 256, (3, 150), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = bb.train_forward(ids)
    assert logits.shape == (3, 150, 258)
    for b in range(3):
        for t in (0, 9, 149):
            expected = bb.forward(bb.init_state(), ids[b, :t + 1])
            torch.testing.assert_close(logits[b, t], expected, atol=2e-4, rtol=2e-4)


def test_gradients_reach_every_parameter_through_the_chunked_ops():
    bb = load_backbone(SMALL)
    model = bb.model.train()
    ids = torch.randint(0, 256, (2, 130), generator=torch.Generator().manual_seed(1))
    bb.train_forward(ids).logsumexp(-1).mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name
