"""RESEARCH, not the framework: the lab work that produced memexp's shipped tiny checkpoints.

The models in memexp/assets (tiny_gdn, tiny_gdn_words, tiny_llama_niah and the tiny Titan-Llama
built on it) were trained here, from scratch on two CPU cores, so that every method and benchmark
runs end to end without a download. This package keeps their recipes (tiny_gdn, tiny_gdn_words,
tiny_llama), the synthetic text they learn from (niah_text, niah_words), the word tokenizer, the
lexical heads and the small RULER check they end with (niah_eval), so that a shipped checkpoint
can be remade (`python -m memexp train recipe=<name> replace_assets=true`) and its choices read.

A researcher using memexp does not need it: the framework is memexp.core, run, backbones,
methods, benchmarks and training (one training loop and the paper recipes). This package sits
above them (it may import training, run, methods and benchmarks; nothing imports it but the CLI's
recipe registry).
"""
