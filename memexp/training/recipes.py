"""memexp's training recipes by name (`python -m memexp train recipe=<name>`), registered lazily:
naming or validating a recipe imports only its schema's module when it is loaded."""

from memexp.core.registry import RECIPES

RECIPES.register("tiny_gdn", "memexp.training.tiny_gdn:run", schema="memexp.training.tiny_gdn:TinyGDNRecipe")
RECIPES.register("tiny_gdn_words", "memexp.training.tiny_gdn_words:run",
                 schema="memexp.training.tiny_gdn_words:TinyGDNWordsRecipe")
RECIPES.register("notebank_lora", "memexp.training.notebank_lora.train:run",
                 schema="memexp.training.notebank_lora.recipe:NoteBankLoRARecipe")
RECIPES.register("tiny_llama_niah", "memexp.training.tiny_llama:run", schema="memexp.training.tiny_llama:TinyLlamaRecipe")
# one schema and run function, two recipe files: the paper's post-training and its tiny CPU version
RECIPES.register("titan_llama", "memexp.training.titan_llama.run:run",
                 schema="memexp.training.titan_llama.config:TitanLlamaRecipe")
RECIPES.register("tiny_titan", "memexp.training.titan_llama.run:run",
                 schema="memexp.training.titan_llama.config:TitanLlamaRecipe")
