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

from memexp.core.paths import CONF_DIR
from memexp.core.registry import RECIPES
from memexp.core.schema import ConfigError, _build

RECIPE_OPTIONS = CONF_DIR / "recipe"


def _backbone_layer(name: str, node, overrides: list[str]) -> None:
    """A recipe with a `backbone` field takes conf/recipe/<name>_<backbone>.yaml (that backbone's
    settings, e.g. its adapter placement) over its own YAML, before the command's overrides."""
    if "backbone" not in node:
        return
    chosen = [o.split("=", 1)[1] for o in overrides if o.startswith("backbone=")]
    backbone = chosen[-1] if chosen else node.backbone
    layer = RECIPE_OPTIONS / f"{name}_{backbone}.yaml"
    if layer.is_file():
        node.merge_with(OmegaConf.load(layer))


def load_recipe(argv: list[str]):
    """(validated recipe, its run function) from `recipe=<name>` and dot-path overrides."""
    names = [a.split("=", 1)[1] for a in argv if a.startswith("recipe=")]
    overrides = [a.removeprefix("recipe.") for a in argv if not a.startswith("recipe=")]
    name = names[-1] if names else "tiny_gdn"
    if name not in RECIPES:
        raise ConfigError(RECIPES.unknown_message(name))
    bad = [a for a in overrides if "=" not in a]
    if bad:
        raise ConfigError(f"{bad[0]!r}: expected field=value")
    try:
        node = OmegaConf.load(RECIPE_OPTIONS / f"{name}.yaml")
        _backbone_layer(name, node, overrides)
        for override in overrides:
            key, value = override.split("=", 1)
            # a dot path may index into lists (stages.0.steps), which from_dotlist cannot merge
            OmegaConf.update(node, key, yaml.safe_load(value), merge=True)
    except (OmegaConfBaseException, yaml.YAMLError) as e:
        raise ConfigError(f"recipe: {str(e).splitlines()[0]}") from None
    entry = RECIPES.get(name)
    recipe = _build(entry.load_schema(), node, "recipe")
    _choose_output(recipe, name)
    return recipe, entry.load()


def _choose_output(recipe, name: str) -> None:
    """A new folder by default; the shipped assets only with replace_assets=true."""
    from memexp.core.schema import ASSETS_DIR

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


def run_config(recipe):
    """The run configuration a recipe trains for, composed as `memexp run` composes its arguments
    (`recipe.run_arguments()`: a recipe that trains a method's adapter, e.g. notebank_lora); the
    recipe's run takes it as `cfg`, so that training never imports the app."""
    from memexp.core.compose import load_config

    return load_config(recipe.run_arguments())


def main(argv: list[str]) -> int:
    from memexp.run.checks import check_recipe

    try:
        recipe, run = load_recipe(list(argv))
        check_recipe(recipe)
        given = {"cfg": run_config(recipe)} if hasattr(recipe, "run_arguments") else {}
    except ConfigError as e:
        print(f"memexp: {e}", file=sys.stderr)
        return 2
    run(recipe, log=lambda line: print(line, flush=True), **given)
    return 0
