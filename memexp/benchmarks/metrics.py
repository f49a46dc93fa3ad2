"""Official metrics, one function each, scores in [0, 100] per prediction.

Each cites the file it follows; tests pin them to hand-computed tables.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f]")


def ruler_postprocess(pred: str) -> str:
    """RULER scripts/eval/evaluate.py: strip, control characters to newlines, strip."""
    return _CONTROL.sub("\n", pred.strip()).strip()


def string_match_all(prediction: str, references: list[str]) -> float:
    """RULER (NIAH, vt, cwe, fwe): fraction of references found in the prediction, case-insensitive."""
    if not references:
        return 0.0
    pred = prediction.lower()
    return 100.0 * sum(ref.lower() in pred for ref in references) / len(references)


def string_match_part(prediction: str, references: list[str]) -> float:
    """RULER QA: 100 if any reference is found in the prediction, case-insensitive (RULER's
    own any-match, not lm-eval's fractional port)."""
    pred = prediction.lower()
    return 100.0 * float(any(ref.lower() in pred for ref in references))
