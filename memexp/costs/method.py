"""What a method's analytical cost model provides: the counts it adds to a question, its added
FLOPs, the storage it keeps, and any section of its own in the cost report.

A method registers its model beside itself (`METHODS.register(..., costs="memexp.methods.x.costs:XCosts")`);
`memexp.costs.report` finds it there, so the report never names a method. A method with no model
either adds nothing (registered with `adds_flops=False`, as Plain) or is reported as not modelled
(`UnmodelledCosts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memexp.core.registry import METHODS, load_object


@dataclass(frozen=True)
class Counts:
    """The token counts one question's costs are computed from; `assumed` names those that were not
    recorded and were bounded instead, and `basis` says per count how its bound was computed
    ("bound: R·B = 2·64"), for `memexp cost` to print beside the figures that use it."""

    context: int
    question: float
    output: int
    replay: float = 0.0
    notes: float = 0.0
    archived: float = 0.0
    probe: float | None = None
    assumed: tuple[str, ...] = ()
    basis: dict[str, str] = field(default_factory=dict)


class MethodCosts:
    """The defaults: a method whose reading adds nothing to the backbone's own pass."""

    # whether `added_flops` models what the method adds (False: the report says it is not modelled)
    models_added_flops = True

    def counts(self, cfg: Any, context: int, question: float, output: int, replay: float | None,
               notes: float | None, archived: float | None, probe: float | None = None) -> Counts:
        return Counts(context, question, output)

    def describe(self, shapes: Any, cfg: Any) -> dict[str, Any]:
        """The method's settings shown in the report's `method` entry."""
        return {}

    def added_flops(self, shapes: Any, cfg: Any, n: Counts) -> dict[str, float] | None:
        """FLOPs beyond Plain's, by part, with a `total`; None when the method adds none."""
        return None

    def archive_bytes(self, shapes: Any, cfg: Any, n: Counts, helper_bytes: float | None) -> dict[str, float]:
        """Persistent storage beyond the backbone's state, by part."""
        return {}

    def sections(self, run_cfg: Any, shapes: Any, n: Counts) -> dict[str, Any]:
        """Report sections of the method's own (a key each)."""
        return {}

    def table_rows(self, report: dict[str, Any]) -> list[tuple[str, str]]:
        """Rows of `format_cost_table` for the method's own sections."""
        return []


class UnmodelledCosts(MethodCosts):
    """A method that adds work of its own but registered no cost model: Plain's figures only."""

    models_added_flops = False


def method_costs(name: str | None) -> MethodCosts:
    """The cost model of method `name`: the one registered beside it; else Plain's (nothing added) for
    None and for a method registered with adds_flops=False (Plain, clean start); else a model that
    says its added FLOPs are not modelled."""
    if name is None:
        return MethodCosts()
    entry = METHODS.get(name)
    if "costs" in entry.meta:
        return load_object(entry.meta["costs"])()
    return MethodCosts() if entry.meta.get("adds_flops") is False else UnmodelledCosts()
