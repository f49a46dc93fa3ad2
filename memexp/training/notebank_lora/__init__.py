"""The notebank_lora recipe: read adapters for NB-LoRA and the Plain + LoRA control (NoteBank
paper App. B.4, C.4). Schema: `recipe`; examples: `data`; the loop: `train`."""
