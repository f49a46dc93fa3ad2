"""The longhealth benchmark: its schema (config.py), examples and scoring (benchmark.py)."""
