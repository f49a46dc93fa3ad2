"""NoteBank key distinctiveness d_t = 1 - <unit key, normalised mean of the chunk's unit keys>."""

from memexp.kernels.distinctiveness.reference import chunk_distinctiveness_reference

chunk_distinctiveness = chunk_distinctiveness_reference

__all__ = ["chunk_distinctiveness", "chunk_distinctiveness_reference"]
