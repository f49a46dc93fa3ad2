"""Composing a run's config from conf/ with Hydra and validating it into a RunConfig, before
anything loads; Hydra's own errors turned into one line naming the field.

Every command that reads a config composes it here: the `run` app (memexp.cli.app), `train`,
`cost`, `latency`, lm-eval's model, a launcher's worker.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import fields

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from memexp.core.errors import override_type_message
from memexp.core.paths import CONF_DIR
from memexp.core.registry import BENCHES, METHODS
from memexp.core.schema import (
    GLOBAL_GROUPS,
    ConfigError,
    RunConfig,
    global_package_message,
    schema_node,
    store_schemas,
    validate,
)

# The configs ship inside the package: Hydra finds them by module, from any folder, in a checkout
# and in an installed wheel alike.
PRIMARY = "pkg://memexp.conf"


GROUPS = ("backbone", "method", "bench", "logger", "experiment", "hparams_search", "paths", "hydra/launcher")


# Launchers that come from a Hydra plugin rather than a YAML here: option -> (plugin module, extra)
PLUGIN_LAUNCHERS = {"joblib": ("joblib", "hydra-joblib-launcher", "sweep"),
                    "processes": ("submitit", "hydra-submitit-launcher", "cluster"),
                    "slurm": ("submitit", "hydra-submitit-launcher", "cluster"),
                    "slurm_local": ("submitit", "hydra-submitit-launcher", "cluster")}


def group_options(group: str) -> list[str]:
    """The YAML options of a conf/ group; for method and bench also every registered name (an
    outside package's entry runs by name, composed from its schema's defaults)."""
    d = CONF_DIR / group
    files = {p.stem for p in d.glob("*.yaml")} if d.is_dir() else set()
    registry = {"method": METHODS, "bench": BENCHES}.get(group)
    plugins = set(PLUGIN_LAUNCHERS) if group == "hydra/launcher" else set()
    return sorted(files | plugins | set(registry.names() if registry is not None else ()))


_GROUP_FIELD = re.compile(r"^(backbone|method|bench|logger)\.[A-Za-z_][\w.]*$")


def _unaddressable_message(key: str, overrides: list[str], config_name: str, where: dict) -> str | None:
    """Every schema field is in the composed config (each conf/ YAML composes its schema's defaults),
    so `group.field=value` reaches Hydra as typed; a key Hydra cannot override is either a field the
    schema lacks (validate names the allowed fields) or a new key of a free-form dict
    (backbone.model), which Hydra adds with `+`."""
    if not _GROUP_FIELD.match(key):
        return None
    probe = ["++" + o if o.lstrip("+~").partition("=")[0] == key else o for o in overrides]
    try:
        validate(compose(probe, config_name, **where))
    except ConfigError as e:
        return str(e)
    return f"{key}: not set by the chosen option; add it with +{key}=..."


def quote_home(args: list[str]) -> list[str]:
    """`field=~/x` (a shell that leaves `~` after `=` alone) quoted as `field='~/x'`: Hydra's lexer
    refuses a bare `~` in a value, and the path expands when the config is validated."""
    out = []
    for a in args:
        key, eq, value = a.partition("=")
        bare = eq and not a.startswith("-") and value.startswith("~") and not set(value) & set("'\"\\")
        out.append(f"{key}='{value}'" if bare else a)
    return out


_stored: dict[str, tuple] = {}  # "key": the registries' entries and the ConfigStore `store_options` last filled


def store_options() -> None:
    """Every schema in Hydra's ConfigStore (see `store_schemas`), and a method or benchmark that is
    registered but has no YAML in conf/ (an outside package's) as a group option made of its
    schema's defaults, so that `method=<name>` / `bench=<name>` runs it.

    Every composition calls it; it stores again only when the registries (an outside package may
    register an entry between two runs) or the store itself changed, since building the nodes
    costs more than composing (a sweep's preflight composes every job)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    entries = [(group, entry) for group, registry in (("method", METHODS), ("bench", BENCHES)) for entry in registry
               if entry.schema is not None]
    own = [(group, entry) for group, entry in entries if not (CONF_DIR / group / f"{entry.name}.yaml").is_file()]
    key = (id(store), tuple((group, entry.name, entry.schema) for group, entry in entries))
    schemas = store.repo.get("schema", {})
    # a caller may also have taken nodes out of the store (a test cleaning up after itself)
    in_store = "backbone.yaml" in schemas and all(f"{e.name}.yaml" in schemas.get(g, {}) for g, e in entries) \
        and all(f"{e.name}.yaml" in store.repo.get(g, {}) for g, e in own)
    if _stored.get("key") == key and in_store:
        return
    store_schemas()
    for group, entry in own:
        store.store(group=group, name=entry.name, node=schema_node(entry))
    _stored["key"] = key


def search_path(config_dir: str | None = None, config_path: str | None = None):
    """The search path `memexp run` composes from, built as Hydra's own command line builds it:
    memexp's configs (or -cp), then --config-dir's folder ahead of the plugins' configs; a
    hydra.searchpath override or `hydra: searchpath:` in a primary config add more."""
    import os

    from hydra._internal.utils import create_automatic_config_search_path
    from hydra.core.config_search_path import SearchPathQuery

    path = create_automatic_config_search_path(__file__, None, config_path or PRIMARY)
    if config_dir is not None:
        folder = os.path.abspath(os.path.expanduser(config_dir))
        if not os.path.isdir(folder):
            raise ConfigError(f"--config-dir {config_dir}: no such folder")
        path.prepend(provider="command-line", path=f"file://{folder}", anchor=SearchPathQuery(provider="schema"))
    return path


def compose(overrides: list[str], config_name: str = "config", config_dir: str | None = None,
            config_path: str | None = None, with_hydra: bool = False) -> DictConfig:
    """Compose memexp's config for one job (no sweeps), as `memexp run` would; ConfigError on failure."""
    from hydra._internal.hydra import Hydra
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    store_options()
    GlobalHydra.instance().clear()
    try:
        hydra = Hydra.create_main_hydra2(task_name="memexp", config_search_path=search_path(config_dir, config_path))
        cfg = hydra.compose_config(config_name, quote_home(overrides), run_mode=RunMode.RUN)
    except ConfigError:
        raise
    except Exception as e:
        error = e
    else:
        error = None
    finally:
        GlobalHydra.instance().clear()
    if error is not None:
        where = {"config_dir": config_dir, "config_path": config_path}
        key = _unknown_key(error)
        message = key and _unaddressable_message(key, overrides, config_name, where)
        raise ConfigError(message or _hydra_message(error, overrides)) from None
    return cfg if with_hydra else without_hydra(cfg)


def load_config(overrides: list[str], **where: str | None) -> RunConfig:
    return validate(compose(overrides, **where))


def check_launcher(overrides: list[str]) -> None:
    """The launchers beyond Hydra's basic one come from an optional plugin: say how to get it."""
    import importlib.util

    for o in overrides:
        key, _, option = o.partition("=")
        if key.lstrip("+~") == "hydra/launcher" and option in PLUGIN_LAUNCHERS:
            plugin, package, extra = PLUGIN_LAUNCHERS[option]
            module = "hydra_plugins." + package.replace("-", "_")
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:
                found = False
            if not found:
                raise ConfigError(f'hydra/launcher={option}: needs the {plugin} launcher, '
                                  f'pip install -e ".[{extra}]" ({package})')


def parse_overrides(overrides: list[str]) -> list:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(overrides)
    except Exception as e:
        raise ConfigError(_hydra_message(e, overrides)) from None


def first_sweep_value(o) -> str:
    """One value of a sweep override, for checking its key and type before the sweeper runs:
    the first of a choice()/range()/glob, the start of an interval() (a float, as Optuna would
    suggest, unless cast: int(interval(1, 4)))."""
    from hydra.core.override_parser.types import IntervalSweep

    sweep = o.value()
    if isinstance(sweep, IntervalSweep):
        return str(sweep.start)
    return next(iter(o.sweep_string_iterator()))


def sweep_jobs(overrides: list[str], params: dict | None = None) -> list[list[str]]:
    """The override list of every job Hydra's basic sweeper expands a multirun to (`params`:
    hydra.sweeper.params, which the command line's own overrides take precedence over)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    given = parse_overrides(overrides)
    keys = {o.get_key_element() for o in given}
    extra = [f"{k}={v}" for k, v in (params or {}).items() if k not in keys]
    batches = BasicSweeper.split_arguments(parse_overrides(extra) + given, max_batch_size=None)
    return [job for batch in batches for job in batch]


def check_launcher_needs_multirun(parsed: list, multirun: bool) -> None:
    """Hydra hands only a multirun's jobs to a launcher: without -m, hydra/launcher=slurm would run
    the job right here (on a login node), so it stops instead."""
    for o in parsed:
        launcher = o.get_key_element().lstrip("+~") == "hydra/launcher"
        if not multirun and launcher and o.value() not in ("local", "basic"):
            raise ConfigError(f"hydra/launcher={o.value()}: a launcher runs the jobs of a sweep; add -m (--multirun) "
                              f"(without -m the run would start here, not on the launcher)")


def without_hydra(cfg: DictConfig) -> DictConfig:
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def _unknown_key(e: Exception) -> str | None:
    """The key of an override Hydra could not apply because the config has no such key."""
    cause = e.__cause__
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and getattr(cause, "full_key", None):
        return cause.full_key
    m = re.search(r"Could not override '([^']+)'", str(e))
    return m.group(1) if m else None


def _hydra_message(e: Exception, overrides: list[str]) -> str:
    """One line from Hydra's multi-line composition errors."""
    text = str(e)
    yaml_error = _yaml_message(e)
    if yaml_error is not None:
        return yaml_error
    if type(e).__name__ == "OverrideParseException":
        return _override_syntax_message(e, overrides)
    m = re.search(r"Could not find '([^']+)/([^'/]+)'", text)
    if m:
        group, option = m.group(1), m.group(2)
        allowed = list(getattr(e, "options", None) or group_options(group))
        close = difflib.get_close_matches(option, allowed, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{group}={option}: {hint}allowed values are {', '.join(allowed)}"
    # Hydra chains the OmegaConf error as the cause of an override's failure, as the context of a
    # YAML file's (a user's file in --config-dir: "In 'backbone/mine': ValidationError ...")
    cause = e.__cause__ or e.__context__
    if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
        if isinstance(cause, (ConfigKeyError, ConfigAttributeError)):  # a field no schema has: foo=1, paths.foo=1
            m = re.search(r"Key '[^']+' not in '(\w+)'", text)
            where = re.match(r"In '([^']+)'", text)
            if m and where:  # set by a YAML file (a user's in --config-dir): name the schema and the file
                return f"{cause.full_key}: unknown field of {m.group(1)} (set in {where.group(1)}.yaml)"
            return _unknown_field_message(cause.full_key)
        # a value the schema's type rejects while composing, e.g. method.chunk_size=abc
        where = re.match(r"In '([^']+)'", text)
        return override_type_message(cause.full_key, str(cause).splitlines()[0], overrides) + (
            f" (set in {where.group(1)}.yaml)" if where else "")
    m = re.search(r"Ambiguous value for argument '\+*([^=']+)=([^']*)'", text)
    if m:
        return sweep_or_list_message(m.group(1), m.group(2))
    m = re.search(r"Could not override '([^']+)'", text)
    if m and re.match(r"[\w/]+@(\w+)\.", m.group(1)) and m.group(1).split("@")[1].split(".")[0] in GLOBAL_GROUPS:
        group = m.group(1).split("@")[1].split(".")[0]  # backbone@experiment.backbone: an override in its defaults
        chosen = [o.split("=", 1)[1] for o in overrides if o.lstrip("+~").split("=", 1)[0] == group]
        return global_package_message(group, chosen[-1] if chosen else None)
    if m:
        key = m.group(1)
        return f"{key}: unknown field (to add a new key use +{key}=...; see `python -m memexp ls`)"
    m = re.search(r"Could not (?:append|delete) to config\. An item is already at '([^']+)'", text)
    if m:
        return f"{m.group(1)}: already set; override it with {m.group(1)}=... (no +)"
    m = re.search(r"Key '[^']+' not in '(\w+)'\s+full_key: (\S+)", text)
    if m:  # a field a YAML file sets that its schema lacks (a user's file in --config-dir)
        where = re.match(r"In '([^']+)'", text)
        return f"{m.group(2)}: unknown field of {m.group(1)}" + (f" (set in {where.group(1)}.yaml)" if where else "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    # Hydra's "In 'x': SomeError raised while composing config:" says what only its next line
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def _yaml_message(e: BaseException) -> str | None:
    """A YAML syntax error in a config file, with the file, line and column it is at."""
    import yaml

    error = next((x for x in (e, e.__cause__, e.__context__) if isinstance(x, yaml.MarkedYAMLError)), None)
    if error is None:
        return None
    mark = error.context_mark or error.problem_mark  # where the unclosed bracket or quote opened
    where = f"{mark.name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else "a config file"
    what = "; ".join(part for part in (error.context, error.problem) if part)
    return f"{where}: not valid YAML ({what})"


def _override_syntax_message(e: Exception, overrides: list[str]) -> str:
    """An override Hydra's lexer or parser refuses, named (each is parsed alone to find it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for o in overrides:
        try:
            parser.parse_overrides([o])
        except Exception as one:
            detail = (str(one).strip().splitlines() or [type(one).__name__])[0]
            return (f"{o}: not a valid override ({detail}); close every bracket and quote, and quote a value with "
                    f"special characters: key='value'")
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def sweep_or_list_message(key: str, value: str) -> str:
    """`key=a,b` without -m: a sweep, or a list written without its brackets."""
    return f"{key}={value}: a sweep; add -m (--multirun) to run each value, or write {key}=[{value}] for a list"


def _unknown_field_message(key: str) -> str:
    """One line for `key=value` naming a field the run has not, with the fields it has."""
    from memexp.core.schema import PathsConfig

    parent, _, name = key.rpartition(".")
    known = {"": RunConfig, "paths": PathsConfig}.get(parent)
    if known is None:
        return f"{key}: unknown field (`python -m memexp run --help` lists every field)"
    allowed = ", ".join(sorted(f.name for f in fields(known)))
    return f"{key}: unknown field; allowed {'top-level ' if not parent else parent + ' '}fields are {allowed}"


def _job_subdir(mode: object) -> str | None:
    """hydra.output_subdir: Hydra's .hydra/ files in a sweep's job folder; none for a single run,
    whose Hydra folder is the current one."""
    return ".hydra" if getattr(mode, "name", str(mode)).endswith("MULTIRUN") else None


def _help_groups() -> str:
    """`run --help`'s groups: the ones a user chooses (GROUPS), without schemas, backbone-specific
    defaults, which Hydra's own $APP_CONFIG_GROUPS would list."""
    return "\n".join(f"{group}: {', '.join(group_options(group))}" for group in GROUPS)


if not OmegaConf.has_resolver("memexp_job_subdir"):
    OmegaConf.register_new_resolver("memexp_job_subdir", _job_subdir)
if not OmegaConf.has_resolver("memexp_help_groups"):
    OmegaConf.register_new_resolver("memexp_help_groups", _help_groups)

# Composing conf/ through Hydra's own API (initialize_config_dir + compose, a launcher's worker)
# needs the schemas the YAMLs name: importing memexp.core.compose stores them. `compose` and `hydra_run`
# store again, for entries registered after this import.
store_options()
