"""--model_args for --model memexp: memexp overrides validated before any model loads."""

import pytest

from memexp.core.schema import ConfigError
from memexp.lmeval.config import LmEvalArgs, load, parse_model_args


def test_model_args_become_hydra_overrides_and_the_models_own_arguments():
    # values as lm-eval's parser hands them over (it turns "true" into True, "8" into 8)
    overrides, args = parse_model_args({"backbone": "tiny_gdn", "method": "notebank", "method.replay_budget": 1,
                                        "method.rescale": None, "progress": False, "split": "last_line",
                                        "max_length": 2048, "batch_size": 1, "device": "cuda:0"})
    assert overrides == ["backbone=tiny_gdn", "method=notebank", "method.replay_budget=1", "method.rescale=null",
                         "progress=false"]
    assert args == LmEvalArgs(split="last_line", max_length=2048)


@pytest.mark.parametrize("key", ["bench", "bench.lengths", "logger", "pretrained"])
def test_a_key_memexp_does_not_take_is_one_line(key):
    with pytest.raises(ConfigError, match=f"model_args {key}: unknown key; allowed keys are backbone, method"):
        parse_model_args({key: "x"})


def test_wrong_values_are_memexp_config_errors():
    with pytest.raises(ConfigError, match="method.replay_budget=0: must be an integer >= 1"):
        load({"backbone": "tiny_gdn", "method": "notebank", "method.replay_budget": 0})
    with pytest.raises(ConfigError, match="method=nope"):
        load({"method": "nope"})
    with pytest.raises(ConfigError, match="split='lastline'"):
        load({"split": "lastline"})
    with pytest.raises(ConfigError, match="max_length=0"):
        load({"max_length": 0})
    cfg, args = load({"backbone": "tiny_gdn", "method": "notebank", "method.router": "bm25"})
    assert (cfg.backbone.name, cfg.method.name, cfg.method.router) == ("tiny_gdn", "notebank", "bm25")
