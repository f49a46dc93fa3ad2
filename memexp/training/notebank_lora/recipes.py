"""Registers recipe=notebank_lora (NoteBank's read adapters, App. C.4) without importing torch."""

from memexp.core.registry import RECIPES

RECIPES.register("notebank_lora", "memexp.training.notebank_lora.train:run",
                 schema="memexp.training.notebank_lora.recipe:NoteBankLoRARecipe")
