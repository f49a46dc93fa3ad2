"""Helpers shared by the reference (non-kernel) forms of the recurrences: the gated delta
rule, the GDN-2 rule and Mamba-2's SSD each come in a per-token and a chunked form."""

from __future__ import annotations

import torch

FORMS = ("recurrent", "chunk")


def reference_form(form: str, length: int, recurrent_max_t: int) -> str:
    """The form to run: 'auto' takes the per-token loop up to `recurrent_max_t` tokens, where
    it is cheaper than one zero-padded chunk, and the chunked form above."""
    if form == "auto":
        return "recurrent" if length <= recurrent_max_t else "chunk"
    if form not in FORMS:
        raise ValueError(f"form={form!r}: allowed values are auto, chunk, recurrent")
    return form


def fp32_state(initial_state: torch.Tensor | None, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """The state a recurrence starts from, in fp32 whatever the caller carried: `initial_state`,
    or zeros of `shape` when there is none."""
    if initial_state is None:
        return torch.zeros(shape, dtype=torch.float32, device=device)
    return initial_state.float()
