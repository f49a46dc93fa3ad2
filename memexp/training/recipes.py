"""memexp's training recipes by name (`python -m memexp train recipe=<name>`), registered lazily:
naming or validating a recipe imports only its schema's module when it is loaded."""

from memexp.registry import RECIPES

RECIPES.register("tiny_gdn", "memexp.training.tiny_gdn:run", schema="memexp.training.tiny_gdn:TinyGDNRecipe")
RECIPES.register("notebank_lora", "memexp.training.notebank_lora.train:run",
                 schema="memexp.training.notebank_lora.recipe:NoteBankLoRARecipe")
