"""The task x length summary of a results frame (memexp.results.frame), with Wilson intervals."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import pandas as pd

Z95 = 1.959964  # two-sided 95 % normal quantile
ALL = "all"  # the task / length of a row that pools every task / length of its group
# what keeps runs apart even when `by` does not name it: a benchmark's tasks, and which tasks a run covers
NEVER_POOLED = ("bench.name", "task_set")


def wilson(score: float, n: int, z: float = Z95) -> tuple[float, float]:
    """95 % Wilson score interval (percent) of a proportion `score` % over n trials. Fractional
    per-question scores (RULER's partial matches, F1) are treated as the proportion they average to."""
    p = min(max(score / 100.0, 0.0), 1.0)
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return 100.0 * (centre - half), 100.0 * (centre + half)


def group_keys(df: pd.DataFrame, by: Sequence[str]) -> list[str]:
    """`by`, plus the columns that must never be pooled where they take more than one value:
    runs of different benchmarks or task sets are grouped apart, never averaged together."""
    missing = [k for k in by if k not in df.columns]
    if missing:
        import difflib

        close = difflib.get_close_matches(missing[0], list(df.columns), n=1)
        raise KeyError(f"{missing[0]}: no run has this field" + (f"; did you mean {close[0]}?" if close else ""))
    return list(by) + [k for k in NEVER_POOLED if k not in by and k in df.columns and df[k].nunique() > 1]


def summarize(df: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Long table: one row per group (`by`'s values) x task x length with n, the mean score and its
    95 % Wilson interval (ci_low, ci_high), plus the pooled rows of each group: task `all` per
    length, length `all` per task, and both `all` (question-weighted means, as summary.json's)."""
    import pandas as pd

    from memexp.run.records import _length_order

    keys = group_keys(df, by)
    rows = []
    for group, part in (df.groupby(keys, sort=True, dropna=False) if keys else [((), df)]):
        group = group if isinstance(group, tuple) else (group,)
        head = dict(zip(keys, group))
        cells = [(t, n, p) for (t, n), p in part.groupby(["task", "length"], sort=False)]
        cells += [(t, ALL, p) for t, p in part.groupby("task", sort=False)]
        cells += [(ALL, n, p) for n, p in part.groupby("length", sort=False)]
        cells.append((ALL, ALL, part))
        for task, length, p in cells:
            n = len(p)
            score = float(p["score"].mean())
            lo, hi = wilson(score, n)
            rows.append({**head, "task": task, "length": length, "n": n, "score": score, "ci_low": lo, "ci_high": hi})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    order = out.assign(_t=out["task"].map(lambda t: (t == ALL, t)),
                       _l=out["length"].map(lambda n: (n == ALL, _length_order(str(n)))))
    return order.sort_values([*keys, "_t", "_l"], kind="stable").drop(columns=["_t", "_l"]).reset_index(drop=True)
