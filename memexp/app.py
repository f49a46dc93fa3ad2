"""Hydra composition: the `run` app, and composing + validating a config before anything loads.

Every job of a command line (each point of a multirun sweep too) is composed and validated
up front, so a wrong value stops the command with one line before any model loads.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from memexp.config import ConfigError, RunConfig, schema_node, store_schemas, validate
from memexp.errors import command_line, exit_code, override_type_message
from memexp.registry import BENCHES, METHODS

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
GROUPS = ("backbone", "method", "bench", "logger", "experiment", "hydra/launcher")


def group_options(group: str) -> list[str]:
    """The YAML options of a conf/ group; for method and bench also every registered name (an
    outside package's entry runs by name, composed from its schema's defaults)."""
    d = CONF_DIR / group
    files = {p.stem for p in d.glob("*.yaml")} if d.is_dir() else set()
    registry = {"method": METHODS, "bench": BENCHES}.get(group)
    return sorted(files | set(registry.names() if registry is not None else ()))


_FIELD_OVERRIDE = re.compile(r"^(backbone|method|bench|logger)\.[A-Za-z_][\w.]*=")


def schema_overrides(overrides: list[str]) -> list[str]:
    """Let `group.field=value` set any schema field, also one its YAML leaves at the default
    (`++` adds or overrides); `validate` then rejects fields the schema does not have."""
    return ["++" + o if _FIELD_OVERRIDE.match(o) else o for o in overrides]


def store_options() -> None:
    """Every schema in Hydra's ConfigStore (see `store_schemas`), and a method or benchmark that is
    registered but has no YAML in conf/ (an outside package's) as a group option made of its
    schema's defaults, so that `method=<name>` / `bench=<name>` runs it."""
    from hydra.core.config_store import ConfigStore

    store_schemas()
    for group, registry in (("method", METHODS), ("bench", BENCHES)):
        for entry in registry:
            if entry.schema is not None and not (CONF_DIR / group / f"{entry.name}.yaml").is_file():
                ConfigStore.instance().store(group=group, name=entry.name, node=schema_node(entry))


def compose(overrides: list[str]) -> DictConfig:
    """Compose conf/config.yaml with `overrides` (no sweeps), raising ConfigError."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    store_options()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=schema_overrides(overrides))
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(_hydra_message(e, overrides)) from None
    finally:
        GlobalHydra.instance().clear()


def load_config(overrides: list[str]) -> RunConfig:
    return validate(compose(overrides))


def sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """The override list of every job a multirun command line expands to."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as e:
        raise ConfigError(_hydra_message(e, overrides)) from None
    batches = BasicSweeper.split_arguments(parsed, max_batch_size=None)
    return [job for batch in batches for job in batch]


SUBMITIT_LAUNCHERS = ("processes", "slurm")  # conf/hydra/launcher options built on hydra-submitit-launcher


def check_launcher(overrides: list[str]) -> None:
    """The launchers beyond Hydra's basic one come from an optional plugin: say how to get it."""
    import importlib.util

    for o in overrides:
        key, _, option = o.partition("=")
        if key.lstrip("+~") == "hydra/launcher" and option in SUBMITIT_LAUNCHERS:
            try:
                found = importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is not None
            except ModuleNotFoundError:
                found = False
            if not found:
                raise ConfigError(f'hydra/launcher={option}: needs the submitit launcher, '
                                  f'pip install -e ".[cluster]" (hydra-submitit-launcher)')


def preflight(overrides: list[str], multirun: bool) -> list[RunConfig]:
    """Validate every job; ConfigError names the first bad field."""
    from memexp.run_checks import check_launcher_environment, check_run

    check_launcher(overrides)
    check_launcher_environment(overrides)
    user = [o for o in overrides if not o.startswith("hydra.") and not o.startswith("hydra/")]
    jobs = sweep_jobs(user) if multirun else [user]
    cfgs = [load_config(job) for job in jobs]
    for cfg in cfgs:
        check_run(cfg)
    return cfgs


def _hydra_message(e: Exception, overrides: list[str]) -> str:
    """One line from Hydra's multi-line composition errors."""
    text = str(e)
    m = re.search(r"Could not find '([^']+)/([^'/]+)'", text)
    if m:
        group, option = m.group(1), m.group(2)
        allowed = getattr(e, "options", None) or group_options(group)
        close = difflib.get_close_matches(option, allowed, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{group}={option}: {hint}allowed values are {', '.join(allowed)}"
    cause = e.__cause__
    if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
        # a value the schema's type rejects while composing, e.g. method.chunk_size=abc
        return override_type_message(cause.full_key, str(cause).splitlines()[0], overrides)
    m = re.search(r"Could not override '([^']+)'", text)
    if m:
        key = m.group(1)
        return f"{key}: unknown field (to add a new key use +{key}=...; see `python -m memexp ls`)"
    m = re.search(r"Could not (?:append|delete) to config\. An item is already at '([^']+)'", text)
    if m:
        return f"{m.group(1)}: already set; override it with {m.group(1)}=... (no +)"
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(e).__name__)
    return first


def hydra_run(argv: list[str]) -> int:
    """`python -m memexp run [-m] overrides...` through Hydra (launchers, sweeps)."""
    import hydra

    multirun = any(a in ("-m", "--multirun") for a in argv)
    overrides = [a for a in argv if not a.startswith("-")]
    try:
        preflight(overrides, multirun)
    except ConfigError as e:
        print(f"memexp: {e}", file=sys.stderr)
        return 2

    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def _main(cfg: DictConfig) -> None:
        from hydra.core.hydra_config import HydraConfig

        from memexp.runner import run

        hc = HydraConfig.get()
        group = Path(hc.sweep.dir).name if hc.mode.name == "MULTIRUN" else None
        try:
            run(validate(cfg), sweep_group=group)
        except BaseException as e:  # one line for what the user can fix (memexp.errors); bugs re-raise
            raise SystemExit(exit_code(e, command_line("run", argv))) from None

    store_options()
    saved = sys.argv
    sys.argv = [saved[0], *schema_overrides(argv)]
    try:
        _main()
    except SystemExit as e:
        return int(e.code or 0)
    finally:
        sys.argv = saved
    return 0


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg)


# Composing conf/ through Hydra's own API (initialize_config_dir + compose, a launcher's worker)
# needs the schemas the YAMLs name: importing memexp.app stores them. `compose` and `hydra_run`
# store again, for entries registered after this import.
store_options()
