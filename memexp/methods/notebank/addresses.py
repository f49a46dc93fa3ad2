"""compact(): the fixed map from a native query to a NoteBank address (paper Eq. 4, 9; App. B.3).

Each channel keeps an ordered set of `address_dim` distinct coordinates of its query, drawn
at random once from a seed and shared by notes and questions, so a question is compared with
notes in the same coordinates. `address_dim=None` keeps the full query (identity).
"""

from __future__ import annotations

import torch

from memexp.backbones.base import Backbone, Channel
from memexp.core.schema import ConfigError
from memexp.methods.notebank.config import check_layers_present


def indexed_channels(backbone: Backbone, layers: list[int] | None) -> list[Channel]:
    """The channels of `method.layers` (paper's L), in the backbone's order; all for None."""
    if layers is None:
        return list(backbone.channels)
    check_layers_present(layers, sorted({ch.layer for ch in backbone.channels}), f"backbone {backbone.name!r}")
    return [ch for ch in backbone.channels if ch.layer in layers]


class ChannelLayout:
    """Where each layer's heads sit in the backbone's flat channel list (the J = |L x H|
    addressable channels), so observers can write a layer's features into [T, J, ...]."""

    def __init__(self, channels: list[Channel], device: torch.device) -> None:
        if not channels:
            raise ValueError("NoteBank needs a backbone with at least one addressable channel")
        self.channels = channels
        self.size = len(channels)
        by_layer: dict[int, list[int]] = {}
        for j, ch in enumerate(channels):
            by_layer.setdefault(ch.layer, []).append(j)
        self.slots = {layer: torch.tensor(js, device=device) for layer, js in by_layer.items()}


class AddressCompactor:
    """Fixed random coordinate selection per channel, applied layer by layer."""

    def __init__(self, layout: ChannelLayout, address_dim: int | None, seed: int, device: torch.device) -> None:
        widths = {ch.d_k for ch in layout.channels}
        self.layout = layout
        self.identity = address_dim is None
        if self.identity:
            if len(widths) != 1:
                raise ConfigError(f"method.address_dim=null needs one query width across channels, got {sorted(widths)}")
            self.dim = widths.pop()
            self.index = None
            return
        if address_dim > min(widths):
            raise ConfigError(f"method.address_dim={address_dim}: larger than the backbone's query width "
                              f"{min(widths)}; choose method.address_dim <= {min(widths)} (or null: the full query)")
        self.dim = address_dim
        generator = torch.Generator().manual_seed(seed)
        rows = [torch.randperm(ch.d_k, generator=generator)[:address_dim] for ch in layout.channels]
        self.index = torch.stack(rows).to(device)  # [J, d_rho]
        self._rows = torch.arange(max(len(s) for s in layout.slots.values()), device=device)[:, None]

    def __call__(self, layer: int, queries: torch.Tensor) -> torch.Tensor:
        """[T, H, d_k] queries of one layer's channels -> [T, H, dim]."""
        if self.identity:
            return queries
        index = self.index[self.layout.slots[layer]]  # [H, d_rho]
        return queries[:, self._rows[: index.shape[0]], index]

    def nbytes(self) -> int:
        """Resident bytes of the coordinate selection (a helper tensor, App. C.7)."""
        return 0 if self.index is None else self.index.numel() * self.index.element_size()
