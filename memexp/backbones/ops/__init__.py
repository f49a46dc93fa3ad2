"""Reference ops shared by the recurrent backbones (plain PyTorch, documented shapes).

`gated_delta_rule` dispatches to FLA's kernels on CUDA through `memexp.kernels.dispatch`; the
others are plain torch ops that run everywhere.
"""

from memexp.backbones.ops.gated_delta_rule import (
    chunk_gated_delta_rule_ref,
    gated_delta_rule,
    recurrent_gated_delta_rule_ref,
)
from memexp.backbones.ops.gdn_gate import gdn_gate
from memexp.backbones.ops.l2norm import l2_norm
from memexp.backbones.ops.norms import gated_rms_norm, rms_norm
from memexp.backbones.ops.short_conv import short_conv, short_conv_window

__all__ = [
    "chunk_gated_delta_rule_ref",
    "gated_delta_rule",
    "gated_rms_norm",
    "gdn_gate",
    "l2_norm",
    "recurrent_gated_delta_rule_ref",
    "rms_norm",
    "short_conv",
    "short_conv_window",
]
