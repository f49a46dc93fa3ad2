"""memexp convert: checkpoint converters a backbone needs before it loads, shipped in the package
so that an installed memexp has them (scripts/convert_*.py run the same code from a checkout).

  memexp convert mamba2-megatron CHECKPOINT OUT [--tokenizer FILE]   # backbone=mamba2_8b
  memexp convert gdn2-litgpt CHECKPOINT OUT [--tokenizer DIR]        # backbone=gdn2 (smaller, optional)

Example: memexp convert mamba2-megatron --help
"""

from __future__ import annotations

import importlib
import sys

# converter name -> module under memexp.convert (each has main(argv) -> exit code)
CONVERTERS = {"mamba2-megatron": "mamba2_megatron", "gdn2-litgpt": "gdn2_litgpt"}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in CONVERTERS:
        print(f"memexp: convert {name!r}: allowed converters are {', '.join(CONVERTERS)}", file=sys.stderr)
        return 2
    return importlib.import_module(f"memexp.convert.{CONVERTERS[name]}").main(rest)
