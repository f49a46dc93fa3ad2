"""lm-eval's ``--model_args`` for ``--model memexp``: memexp overrides plus the model's own arguments.

``backbone=``, ``method=`` and dotted ``backbone.*`` / ``method.*`` fields (and ``kernels``,
``threads``, ``output_dir``, ``progress``) are memexp overrides, composed and validated by
``memexp.core.compose.load_config`` before any model loads. The model's own arguments are
``LmEvalArgs``'s fields. lm-eval adds ``batch_size``, ``max_batch_size`` and ``device``
itself: memexp answers one request at a time and places the model by ``backbone.device``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Optional

from memexp.core.schema import ConfigError, RunConfig, _at_least
from memexp.lmeval.split import check_split

GROUPS = ("backbone", "method")
TOP_LEVEL = ("kernels", "threads", "output_dir", "progress")
LM_EVAL_OWN = ("batch_size", "max_batch_size", "device")  # lm-eval passes these to every model


@dataclass
class LmEvalArgs:
    """The memexp model's arguments beyond the memexp config."""

    split: str = "auto"  # see memexp.lmeval.split
    max_length: Optional[int] = None  # context + question + max_gen_toks tokens; longer = an error (null: no limit)
    run_dir: Optional[str] = None  # memexp run folder; null = <output_dir>/lm_eval/<backbone>/<method>/<hash>
    tokenizer: Optional[str] = None  # read by lm-eval's RULER tasks to size their data; memexp uses the backbone's

    def __post_init__(self) -> None:
        check_split(self.split)
        if self.max_length is not None:
            _at_least("max_length", self.max_length, 1)


def _override_value(value: Any) -> str:
    """A value lm-eval already parsed (true -> True, 3 -> 3), written back as Hydra reads it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def parse_model_args(model_args: dict[str, Any]) -> tuple[list[str], LmEvalArgs]:
    """(memexp overrides, the model's own arguments); ConfigError for a key neither knows."""
    own = {f.name for f in fields(LmEvalArgs)}
    overrides, kwargs = [], {}
    for key, value in model_args.items():
        if key in own:
            kwargs[key] = value
        elif key in GROUPS or key in TOP_LEVEL or ("." in key and key.split(".", 1)[0] in GROUPS):
            overrides.append(f"{key}={_override_value(value)}")
        elif key not in LM_EVAL_OWN:
            allowed = [*GROUPS, *(f"{g}.<field>" for g in GROUPS), *TOP_LEVEL, *sorted(own)]
            raise ConfigError(f"model_args {key}: unknown key; allowed keys are {', '.join(allowed)} "
                              f"(lm-eval's --tasks choose the benchmark, not bench=)")
    try:
        return overrides, LmEvalArgs(**kwargs)
    except TypeError as e:  # a value of the wrong type for the dataclass
        raise ConfigError(f"model_args: {e}") from None


def load(model_args: dict[str, Any]) -> tuple[RunConfig, LmEvalArgs]:
    """The validated memexp config and the model's arguments; loads no model."""
    from memexp.core.compose import load_config

    overrides, args = parse_model_args(model_args)
    return load_config(overrides), args


def config_dict(cfg: RunConfig, args: LmEvalArgs, lm_eval: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run folder's config.yaml: memexp's config with the benchmark named `lm_eval` (lm-eval's
    tasks, limit and the model's split in it), so `memexp report` labels lm-eval runs like its own."""
    d = asdict(cfg)
    d["bench"] = {"name": "lm_eval", "split": args.split, "max_length": args.max_length, **(lm_eval or {})}
    return d


def run_dir(cfg: RunConfig, args: LmEvalArgs, lm_eval: dict[str, Any] | None = None) -> Path:
    """outputs/runs/lm_eval/<backbone>/<method>/<hash of config_dict>, unless `args.run_dir` names one."""
    if args.run_dir:
        return Path(args.run_dir)
    from memexp.run.records import config_hash

    key = config_hash(config_dict(cfg, args, lm_eval))
    return Path(cfg.output_dir) / "lm_eval" / cfg.backbone.name / cfg.method.name / key
