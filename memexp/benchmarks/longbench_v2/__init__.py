"""The longbench_v2 benchmark: its schema (config.py), examples and scoring (benchmark.py)."""
