"""InfLLM (Xiao et al., 2024; official code thunlp/InfLLM @ 12b7079): a training-free context memory
for attention layers. Each attention layer keeps its first tokens, a local window, and the rest of
the history as fixed-size blocks of KV (on the host when computing on a GPU), each indexed by
representative keys; every chunk of queries attends the window plus the top-k blocks it retrieves.

config.py (schema and official defaults, no torch) · context_memory.py (one layer's memory and its
attention step) · layer.py (the attention layer that reads it) · method.py (`method=infllm`).
"""
