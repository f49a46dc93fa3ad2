"""L2 normalisation of query/key vectors. memexp runs no kernel of its own for it: FLA's
delta-rule kernels apply it inside (`use_qk_l2norm_in_kernel`), and reference.py is the PyTorch
form of that step, which the rules' reference paths and the backbones' layers call."""

from memexp.kernels.l2norm.reference import L2_EPS, l2_norm

__all__ = ["L2_EPS", "l2_norm"]
