"""`~` and environment variables expand in every path field, on the command line and in YAML, so
a run never writes into a literal `./~/` folder."""

import shutil

import pytest
from omegaconf import OmegaConf

from memexp.core.compose import compose, load_config
from memexp.core.schema import ASSETS_DIR, ConfigError

RUN = ["backbone=tiny_gdn_random", "method=plain", "bench=ruler"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MEMEXP_TEST_DATA", str(home / "data"))
    monkeypatch.delenv("MEMEXP_ROOT", raising=False)
    return home


@pytest.mark.parametrize("override", ["output_dir='~/runs'", "output_dir=~/runs", "output_dir=$HOME/runs",
                                      "output_dir=${oc.env:HOME}/runs"])
def test_output_dir_on_the_command_line(home, override):
    assert load_config([*RUN, override]).output_dir == f"{home}/runs"


@pytest.mark.parametrize("override", ["paths.root=~/memexp", "paths.root='~/memexp'", "paths.root=$HOME/memexp"])
def test_paths_root_on_the_command_line_places_runs_under_it(home, override):
    cfg = load_config([*RUN, override])
    assert cfg.paths.root == f"{home}/memexp"
    assert cfg.output_dir == f"{home}/memexp/outputs/runs"


def test_the_sweep_folder_expands_too(home):
    hydra = compose([*RUN, "paths.root=~/memexp"], with_hydra=True).hydra
    assert OmegaConf.select(hydra, "sweep.dir").startswith(f"{home}/memexp/outputs/multirun/")


@pytest.mark.parametrize("root", ["~/memexp", "$HOME/memexp", "${oc.env:HOME}/memexp"])
def test_paths_root_in_a_users_local_yaml(home, tmp_path, root):
    conf = tmp_path / "conf"
    (conf / "local").mkdir(parents=True)
    (conf / "local" / "default.yaml").write_text(f"# @package _global_\npaths:\n  root: {root}\n")
    cfg = load_config(RUN, config_dir=str(conf))
    assert cfg.output_dir == f"{home}/memexp/outputs/runs"


@pytest.mark.parametrize("form", ["~/data", "$MEMEXP_TEST_DATA", "${oc.env:MEMEXP_TEST_DATA}"])
def test_data_paths_checkpoints_and_caches(home, form):
    data = home / "data"
    shutil.copytree(ASSETS_DIR / "tiny_gdn", data / "ckpt")
    (data / "words.json").write_text('["a", "b"]')
    cfg = load_config(["backbone=tiny_gdn", "method=plain", "bench=ruler", f"backbone.pretrained='{form}/ckpt'",
                       f"bench.cwe_words_path='{form}/words.json'", f"bench.cache_dir='{form}/cache'"])
    assert cfg.backbone.pretrained == f"{data}/ckpt"
    assert cfg.bench.cwe_words_path == f"{data}/words.json"
    assert cfg.bench.cache_dir == f"{data}/cache"


def test_a_variable_that_is_not_set_is_named(home, monkeypatch):
    monkeypatch.delenv("MEMEXP_NO_SUCH_VAR", raising=False)
    with pytest.raises(ConfigError, match=r"output_dir='\$MEMEXP_NO_SUCH_VAR/runs': the environment variable "
                                          r"MEMEXP_NO_SUCH_VAR is not set"):
        load_config([*RUN, "output_dir=$MEMEXP_NO_SUCH_VAR/runs"])


def test_a_training_recipe_output_expands(home):
    from memexp.cli.train import load_recipe

    recipe = load_recipe(["recipe=tiny_gdn", "output=~/trained"])[0]
    assert recipe.output == f"{home}/trained"


def test_output_dir_takes_a_folder_name_that_reads_as_an_integer(home):
    assert load_config([*RUN, "output_dir=123"]).output_dir == "123"
