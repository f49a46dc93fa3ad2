"""Recipes register beside themselves and RECIPES discovers them over two packages: the paper
recipes in memexp.training, the embedded models' research in memexp.embedded."""

from __future__ import annotations

import sys

import pytest

from memexp.core.registry import RECIPES


def test_each_recipe_registers_in_the_package_where_it_lives():
    origins = {entry.name: entry.origin for entry in RECIPES}
    assert origins == {
        "notebank_lora": "memexp.training.notebank_lora.recipes",
        "titan_llama": "memexp.training.titan_llama.recipes",
        "tiny_gdn": "memexp.embedded.recipes", "tiny_gdn_words": "memexp.embedded.recipes",
        "tiny_llama_niah": "memexp.embedded.recipes", "tiny_titan": "memexp.embedded.recipes",
    }
    # the paper recipes first, then the research, each package's modules in name order
    assert RECIPES.names()[:2] == ["notebank_lora", "titan_llama"]


def test_a_registry_over_a_tuple_of_packages_finds_both_in_order(tmp_path, monkeypatch):
    for package, subs in (("pkga", ("one",)), ("pkgb", ())):
        root = tmp_path / package
        root.mkdir()
        (root / "__init__.py").write_text("")
        if package == "pkgb":  # the package's own recipes.py
            (root / "recipes.py").write_text("from holder import R\n"
                                             "R.register('b', 'x:y')\n")
        for sub in subs:  # a subpackage's recipes.py
            (root / sub).mkdir()
            (root / sub / "__init__.py").write_text("")
            (root / sub / "recipes.py").write_text("from holder import R\n"
                                                   "R.register('a', 'x:y')\n")
    (tmp_path / "holder.py").write_text("from memexp.core.registry import Registry\n"
                                        "R = Registry('thing', package=('pkgb', 'pkga'), module='recipes')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from holder import R

    try:
        assert R._discover() == ["pkgb.recipes", "pkga.one.recipes"]
        assert R.names() == ["b", "a"]
        with pytest.raises(ValueError, match="thing='c': allowed values are b, a"):
            R.get("c")
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] in ("pkga", "pkgb", "holder")]:
            del sys.modules[name]
