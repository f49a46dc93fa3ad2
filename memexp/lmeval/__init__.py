"""memexp as an lm-evaluation-harness model.

    python -m memexp lm-eval --model_args backbone=tiny_gdn,method=notebank --tasks niah_single_1 ...

lm-eval 0.4 discovers models only through its own registry (no plugin entry point), so
`register()` adds "memexp" there; `python -m memexp lm-eval` (memexp.lmeval.cli) registers it
and hands the rest of the command line to lm-eval's CLI. In Python:

    from memexp.lmeval import register; register()
    lm_eval.simple_evaluate(model="memexp", model_args={...}, tasks=[...])
"""

from __future__ import annotations

NAME = "memexp"


def register() -> None:
    """Register `--model memexp` with lm-eval (idempotent). lm-eval imports its own models'
    lazy table only while its registry is empty, so that table is imported first."""
    import lm_eval.models  # noqa: F401
    from lm_eval.api.registry import model_registry

    if NAME not in model_registry:
        model_registry.register(NAME, target="memexp.lmeval.model:MemexpLM")
