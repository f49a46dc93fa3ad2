"""Analytical costs (FLOPs, bytes, added storage) and measured latency of a run."""
