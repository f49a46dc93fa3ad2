"""recipe=tiny_titan: the titan_llama recipe (memexp.training.titan_llama) on the tiny Llama
(recipe=tiny_llama_niah), every layer converted, trained on the NIAH text the embedded models
learn from (memexp.embedded.niah_text): the stage data `niah`, which this module brings."""

from __future__ import annotations

from typing import Iterator

from memexp.embedded.niah_text import niah_text, stream
from memexp.training.loss import IGNORE
from memexp.training.titan_llama import run as titan_run
from memexp.training.titan_llama.config import Stage, TitanLlamaRecipe
from memexp.training.titan_llama.data import Formatter, Sequence

MAX_DRAWS = 1000  # niah: draws per sequence before the settings are called impossible


def niah(recipe: TitanLlamaRecipe, stage: Stage, fmt: Formatter) -> Iterator[Sequence]:
    from memexp.methods.titan.config import TitanConfig

    W = recipe.method.get("segment_length", TitanConfig.segment_length)
    i = 0
    while True:
        rng = stream(recipe.data_seed, f"titan-{stage.name}", i)
        for _ in range(MAX_DRAWS):
            text = niah_text(fmt.tok, rng, rng.randint(recipe.niah.min_lines, recipe.niah.max_lines),
                             recipe.niah.question, note=False)
            # a sequence longer than sequence_length would lose its answer to the cut: draw again
            fits = len(text.ids) <= recipe.sequence_length
            if fits and (recipe.niah.needle == "anywhere" or (text.needle_end - 1) // W < text.answer_start // W):
                break
        else:
            raise ValueError(f"recipe.niah: no sequence of {recipe.niah.min_lines}-{recipe.niah.max_lines} lines in "
                             f"{MAX_DRAWS} draws fits recipe.sequence_length={recipe.sequence_length} with "
                             f"niah.needle={recipe.niah.needle} (segments of {W} tokens)")
        yield Sequence(text.ids, [IGNORE] * text.answer_start + text.ids[text.answer_start:])
        i += 1


def run(recipe: TitanLlamaRecipe, log=print) -> dict:
    """The titan_llama stage loop with `niah` stages read from this module's text."""
    return titan_run.run(recipe, log, extra_data={"niah": niah})
