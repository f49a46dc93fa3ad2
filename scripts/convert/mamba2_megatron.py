"""Convert a Megatron-LM Mamba-2 checkpoint (nvidia/mamba2-8b-3t-4k) into a mamba_ssm
checkpoint directory that `backbone=mamba2_8b` loads.

The converter is memexp.convert.mamba2_megatron, which its docstring describes; installed, it is
`memexp convert mamba2-megatron`. From a checkout:

    python scripts/convert/mamba2_megatron.py mamba2-8b-3t-4k/release/mp_rank_00/model_optim_rng.pt \\
        out/mamba2-8b --tokenizer mamba2-8b-3t-4k/mt_nlg_plus_multilingual_ja_zh_the_stack_frac_015_256k.model
"""

import sys

from memexp.convert.mamba2_megatron import main, write_tokenizer  # noqa: F401 (write_tokenizer: for tests)

if __name__ == "__main__":
    sys.exit(main())
