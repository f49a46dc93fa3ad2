"""NoteBank routing: max cosine over question positions per (channel, note), one vote per channel."""

from memexp.kernels.routing.reference import route_votes_reference

route_votes = route_votes_reference

__all__ = ["route_votes", "route_votes_reference"]
