"""Registers recipe=titan_llama (the authors' three post-training stages) without importing torch.
Its tiny CPU version, recipe=tiny_titan, adds a NIAH stage data of the embedded models' research
and registers in memexp/embedded/recipes.py."""

from memexp.core.registry import RECIPES

RECIPES.register("titan_llama", "memexp.training.titan_llama.run:run",
                 schema="memexp.training.titan_llama.config:TitanLlamaRecipe")
