"""The held-out diagnostic set of the notebank_lora recipe (NoteBank paper App. C.4: "a separate set
of 354 no-support validation examples is used only for post-training diagnostics"):

    python -m memexp.cli.notebank_lora_diagnose backbone=gdn data_path=/data/collection adapter=<dir>

The recipe's overrides (as `memexp train recipe=notebank_lora` takes them) choose the data and the
backbone; the set is the `data.heldout` no-support examples that follow the drawn ones in the shuffled
pool (memexp.training.notebank_lora.data). Each example is read and routed with the adapters off, then
its gold answer is teacher-forced as in training; printed (one JSON line, also written to
`<adapter>/heldout_diagnostics.json` when an adapter is given): the held-out count and the mean
answer NLL without the adapter and with it. The paper reports no figure for this set: the command
shows whether an adapter learned to produce gold answers the context does not support.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import torch

from memexp.core.schema import ConfigError


class NoAdapter:
    """The frozen backbone: `enabled()` changes nothing."""

    def enabled(self):
        return nullcontext()


def heldout_nll(recipe, composed, adapter: str | None) -> dict:
    """The held-out count and mean answer NLL without the adapter and with it (`adapter`: its
    folder, or None); `composed`: the run configuration of recipe.run_arguments(), as the app
    composes it (memexp.cli.train.run_config)."""
    from memexp.adapters import load_adapters
    from memexp.backbones import load_backbone
    from memexp.methods import build_method
    from memexp.training.notebank_lora.data import draw, tokenize
    from memexp.training.notebank_lora.train import example_loss, read_example, run_config

    if recipe.data.source != "nq":
        raise ConfigError(f"recipe.data.source={recipe.data.source}: the held-out diagnostic set is NQ's no-support "
                          f"examples; use data.source=nq")
    if adapter is not None and not Path(adapter).expanduser().is_dir():
        raise ConfigError(f"adapter={adapter}: no such adapter folder")
    cfg = run_config(recipe, composed)
    backbone = load_backbone(cfg.backbone)
    method = build_method(cfg.method)
    held = draw(recipe.data, recipe.data_path, backbone.tokenizer).heldout
    if not held:
        raise ConfigError(f"recipe.data_path={recipe.data_path}: no no-support example is left after the "
                          f"{recipe.data.examples} drawn ones (recipe.data.heldout={recipe.data.heldout})")
    examples = [tokenize(t, recipe.data, backbone.tokenizer) for t in held]
    readers = {"base": NoAdapter()}
    if adapter is not None:
        readers["adapter"] = load_adapters(backbone, Path(adapter).expanduser())
    totals = dict.fromkeys(readers, 0.0)
    with torch.no_grad():
        for ex in examples:
            read = read_example(backbone, method, ex, recipe.replay)
            for name, reader in readers.items():
                totals[name] += example_loss(backbone, method, reader, ex, recipe.replay, read)[0].item()
    out = {"heldout": len(examples), **{f"nll_{name}": round(total / len(examples), 4) for name, total in totals.items()}}
    if adapter is not None:
        out["adapter"] = str(adapter)
        (Path(adapter).expanduser() / "heldout_diagnostics.json").write_text(json.dumps(out, indent=1) + "\n")
    return out
