"""Convert a LitGPT GDN-2 checkpoint (NVlabs' gdn2_1.3B) into a memexp checkpoint directory.

The converter is memexp.convert.gdn2_litgpt, which its docstring describes; installed, it is
`memexp convert gdn2-litgpt`. From a checkout:

    python scripts/convert/gdn2_litgpt.py model-100b.pth out/gdn2-1.3b --tokenizer TinyLlama/TinyLlama_v1.1
"""

import sys

from memexp.convert.gdn2_litgpt import copy_tokenizer, main  # noqa: F401 (the converter's parts, for tests)

if __name__ == "__main__":
    sys.exit(main())
