"""Registers the recipes of the shipped tiny checkpoints (research, see this package's docstring)
without importing torch: naming or validating one imports only its schema's module."""

from memexp.core.registry import RECIPES

RECIPES.register("tiny_gdn", "memexp.embedded.tiny_gdn:run", schema="memexp.embedded.tiny_gdn:TinyGDNRecipe")
RECIPES.register("tiny_gdn_words", "memexp.embedded.tiny_gdn_words:run",
                 schema="memexp.embedded.tiny_gdn_words:TinyGDNWordsRecipe")
RECIPES.register("tiny_llama_niah", "memexp.embedded.tiny_llama:run", schema="memexp.embedded.tiny_llama:TinyLlamaRecipe")
# the titan_llama recipe's schema and stage loop on the tiny Llama, with the NIAH text as its stage data
RECIPES.register("tiny_titan", "memexp.embedded.tiny_titan:run",
                 schema="memexp.training.titan_llama.config:TitanLlamaRecipe")
