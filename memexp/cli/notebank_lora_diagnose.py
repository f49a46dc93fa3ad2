"""`python -m memexp.cli.notebank_lora_diagnose [recipe overrides] [adapter=<dir>]`: the notebank_lora
recipe's held-out diagnostic set (memexp.training.notebank_lora.diagnose), one JSON line."""

from __future__ import annotations

import json
import sys

from memexp.cli.train import load_recipe, run_config
from memexp.core.schema import ConfigError


def main(argv: list[str] | None = None) -> int:
    from memexp.training.notebank_lora.diagnose import heldout_nll

    argv = list(sys.argv[1:] if argv is None else argv)
    adapter = next((a.split("=", 1)[1] for a in argv if a.startswith("adapter=")), None)
    try:
        recipe, _ = load_recipe(["recipe=notebank_lora", *(a for a in argv if not a.startswith("adapter="))])
        print(json.dumps(heldout_nll(recipe, run_config(recipe), adapter)))
    except ConfigError as e:
        print(f"memexp: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
