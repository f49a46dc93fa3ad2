"""Results as data: every question of every run in one tidy pandas DataFrame, and the task x
length summary with Wilson intervals, for a researcher's own notebook and for `memexp report`.

    from memexp.results import load_runs, summarize
    df = load_runs(["outputs/runs"], where="method.name=notebank")
    summarize(df, by=["method.router"])

Needs pandas (pip install -e ".[results]").
"""

from memexp.results.frame import load_runs, where_filter
from memexp.results.stats import summarize, wilson

__all__ = ["load_runs", "summarize", "where_filter", "wilson"]
