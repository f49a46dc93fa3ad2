"""The quality benchmark: its schema (config.py), examples and scoring (benchmark.py)."""
