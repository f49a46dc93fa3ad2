"""`python -m memexp train` never replaces the shipped model unless told to."""

import pytest

from memexp.cli.train import load_recipe
from memexp.core.schema import ASSETS_DIR, ConfigError


def test_the_default_output_is_a_new_folder_under_outputs_train():
    recipe, _ = load_recipe(["recipe=tiny_gdn"])
    assert recipe.output.startswith("outputs/train/tiny_gdn/") and not recipe.replace_assets


def test_replacing_the_assets_takes_the_flag_in_either_spelling():
    for flag in ("replace_assets=true", "recipe.replace_assets=true"):
        recipe, _ = load_recipe(["recipe=tiny_gdn", flag])
        assert recipe.replace_assets and recipe.output is None


@pytest.mark.parametrize("argv", [[f"output={ASSETS_DIR / 'tiny_gdn'}"], [f"output={ASSETS_DIR}/tiny_gdn/../tiny_gdn"],
                                  ["replace_assets=true", "output=/tmp/elsewhere"]])
def test_writing_into_the_assets_without_the_flag_is_refused(argv):
    with pytest.raises(ConfigError, match="replace_assets"):
        load_recipe(["recipe=tiny_gdn", *argv])
