"""Titan-Llama post-training: config.py (schema), data.py (the stages' text), train.py (loss, schedule,
checkpoints, DDP, logging), run.py (the stage loop)."""
