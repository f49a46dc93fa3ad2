"""The readout-boundary rescale (NoteBank paper, App. C.3): the recurrent state is multiplied
by lambda in [0, 1] after the context and before whatever the method reads next (NoteBank's
replay, Plain's question, JRT's second reading). lambda = 1 leaves it unchanged, lambda = 0 is
the clean-start reset; conv windows, KV caches and positions are kept (`State.scale_recurrent`).
Mamba-2's long-context state explosion is why the paper needs it; Table 6 pairs NoteBank's
reset with Plain under the same reset (`method=clean_start`).

Light on purpose (no torch): the schemas import the check.
"""

from __future__ import annotations

from typing import Any, Optional

from memexp.core.schema import ConfigError


def check_rescale(value: Optional[float], allow_none: bool = True) -> None:
    """`method.rescale` is null (no rescale, where allowed) or a number in [0, 1]."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        allowed = "null or a number in [0, 1]" if allow_none else "a number in [0, 1]"
        raise ConfigError(f"method.rescale={value!r}: must be {allowed}")


def apply_rescale(state: Any, lam: Optional[float]) -> None:
    """Scale `state`'s recurrent memory by `lam` in place at the readout boundary; None: nothing."""
    if lam is not None:
        state.scale_recurrent(lam)
