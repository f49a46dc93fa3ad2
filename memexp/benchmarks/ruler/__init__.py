"""RULER (NVIDIA/RULER): needle-in-a-haystack, variable tracking, word extraction and QA,
generated locally for the backbone's tokenizer. config.py (schema, no torch) · benchmark.py (`bench=ruler`)."""
