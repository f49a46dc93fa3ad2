"""memexp's training: one loop (loop.py: AdamW, the learning-rate schedule, accumulation,
clipping), the chunked next-token loss (loss.py) and the paper recipes (notebank_lora/,
titan_llama/), each registered in its recipes.py. `python -m memexp train` is memexp.cli.train;
the embedded models' recipes are research and live in memexp.embedded."""
