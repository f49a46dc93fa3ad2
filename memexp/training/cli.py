"""`python -m memexp train recipe=<name> [field=value ...]`: run a training recipe.

The recipe's YAML (conf/recipe/<name>.yaml) fills its typed schema; `field=value` arguments
override it with OmegaConf dot paths (e.g. `seed=1`, `stages.0.steps=2`, `output=/tmp/ckpt`;
`recipe.seed=1` too). A recipe writes a new folder, outputs/train/<recipe>/<time>, unless told
`output=<dir>`; a recipe that ships its model in memexp/assets replaces it only with
`replace_assets=true`, so that training never changes what `backbone=<name>` runs by surprise.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from memexp.config import ConfigError, _build

CONF_DIR = Path(__file__).resolve().parents[1] / "conf" / "recipe"


def _recipes() -> dict:
    from memexp.training import tiny_gdn, tiny_gdn_words

    return {"tiny_gdn": (tiny_gdn.TinyGDNRecipe, tiny_gdn.run),
            "tiny_gdn_words": (tiny_gdn_words.TinyGDNWordsRecipe, tiny_gdn_words.run)}


def load_recipe(argv: list[str]):
    """(validated recipe, its run function) from `recipe=<name>` and dot-path overrides."""
    names = [a.split("=", 1)[1] for a in argv if a.startswith("recipe=")]
    overrides = [a.removeprefix("recipe.") for a in argv if not a.startswith("recipe=")]
    recipes = _recipes()
    name = names[-1] if names else "tiny_gdn"
    if name not in recipes:
        raise ConfigError(f"recipe={name!r}: allowed values are {', '.join(recipes)}")
    bad = [a for a in overrides if "=" not in a]
    if bad:
        raise ConfigError(f"{bad[0]!r}: expected field=value")
    try:
        node = OmegaConf.load(CONF_DIR / f"{name}.yaml")
        for override in overrides:
            key, value = override.split("=", 1)
            # a dot path may index into lists (stages.0.steps), which from_dotlist cannot merge
            OmegaConf.update(node, key, yaml.safe_load(value), merge=True)
    except (OmegaConfBaseException, yaml.YAMLError) as e:
        raise ConfigError(f"recipe: {str(e).splitlines()[0]}") from None
    schema, run = recipes[name]
    recipe = _build(schema, node, "recipe")
    _choose_output(recipe, name)
    return recipe, run


def _choose_output(recipe, name: str) -> None:
    """A new folder by default; the shipped assets only with replace_assets=true."""
    from memexp.config import ASSETS_DIR

    if recipe.replace_assets:
        if recipe.output is not None:
            raise ConfigError("recipe.replace_assets=true writes memexp/assets; drop recipe.output, or drop "
                              "replace_assets to write recipe.output")
        return
    if recipe.output is None:
        recipe.output = str(Path("outputs") / "train" / name / time.strftime("%Y%m%d-%H%M%S"))
    target = Path(recipe.output).expanduser().resolve()
    if target == ASSETS_DIR.resolve() or ASSETS_DIR.resolve() in target.parents:
        raise ConfigError(f"recipe.output={recipe.output}: the shipped assets; pass recipe.replace_assets=true "
                          f"to replace them, or choose another recipe.output")


def main(argv: list[str]) -> int:
    try:
        recipe, run = load_recipe(list(argv))
    except ConfigError as e:
        print(f"memexp: {e}", file=sys.stderr)
        return 2
    run(recipe, log=lambda line: print(line, flush=True))
    return 0
