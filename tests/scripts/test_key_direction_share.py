"""scripts/probe/key_direction_share.py: the mean direction's share, by hand."""

import math

import torch
from script_module import load_script


def test_mean_direction_share_by_hand():
    share = load_script("key_direction_share").mean_direction_share
    assert math.isclose(share(torch.tensor([[2.0, 0.0], [0.0, 5.0]])), 0.5, rel_tol=1e-6)  # mean (1/2, 1/2)
    assert math.isclose(share(torch.tensor([[1.0, 1.0], [3.0, 3.0]])), 1.0, rel_tol=1e-6)  # one direction
    assert share(torch.tensor([[1.0, 0.0], [-4.0, 0.0]])) < 1e-12  # opposite directions cancel
