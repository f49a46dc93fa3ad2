"""Titan-Llama post-training: config.py (schema), data.py (the stages' text), train.py (loss, schedule,
checkpoints, DDP, logging), stats.py (per-layer memory values), run.py (the stage loop)."""
