"""Titan-Llama (Pan & Behrouz): the first attention layers of a Llama become segmented attention
plus a neural memory per KV head, trained while the backbone stays frozen.

config.py (schema, no torch) · memory.py (the neural memory) · layer.py (the Titan attention layer
and its state) · retrofit.py (installing the layers, the trainable modules and their file) ·
method.py (`method=titan`) · convert.py (the authors' checkpoint names -> memexp's file).
"""
