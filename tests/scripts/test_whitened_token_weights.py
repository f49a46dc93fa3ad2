"""scripts/probe/whitened_token_weights.py: the norms it prints are those of the recipe's whitened inputs."""

import torch
from script_module import load_script


def test_the_texts_mean_squared_whitened_norm_is_the_dimension_less_one():
    """Whitening makes the text's second moment I - u u^T (the mean direction u removed), whose
    trace is D - 1: the count-weighted mean of the squared norms is D - 1 = 5, up to the recipe's
    eigenvalue floor (1e-3 of the mean eigenvalue)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 6, generator=g, dtype=torch.float64) + 0.5
    counts = torch.randint(1, 50, (40,), generator=g).double()
    norms = load_script("whitened_token_weights").whitened_norms(x, counts)
    assert abs((counts @ norms.pow(2)).item() / counts.sum().item() - 5.0) < 0.02


def test_it_prints_each_group_and_the_median(capsys, monkeypatch):
    import sys

    probe = load_script("whitened_token_weights")
    monkeypatch.setattr(sys, "argv", ["x", "--examples", "2"])
    probe.main()
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("frequent   '▁the'") for line in out)
    assert any(line.startswith("hex        'f'") for line in out)
    assert out[-1].startswith("median over the vocabulary:")
