"""memexp command line: python -m memexp <command> [hydra overrides...]

  run      run (or resume) backbone x method x bench; -m for a multirun sweep
  train    run a training recipe (recipe=tiny_gdn_words: the quick start's model; tiny_gdn when none is named)
  ls       list the options of every config group
  cost     analytical FLOPs and persistent storage of a configuration (App. C.6/C.7)
  latency  measured Plain vs NoteBank latency and peak memory (App. C.5)
  data     download and cache a benchmark's data for offline runs
  report   the papers' tables (Markdown, CSV, LaTeX) and figures from run and sweep folders
  browse   one self-contained HTML page: summary tables and every question's notes, votes and answer
  convert  checkpoint converters (mamba2-megatron for backbone=mamba2_8b, gdn2-litgpt)
  status   where each job of a sweep folder stands: pending, running, done or failed, and its log
  dashboard  create or update a W&B workspace with memexp's panels (offline: print and save the spec)
  lm-eval  lm-evaluation-harness with --model memexp (lm-eval's run arguments; pip install -e ".[lmeval]")

`python -m memexp <command> --help` describes a command's fields, with an example.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# OpenMP threads that sleep at a barrier instead of spinning: on a shared machine torch's spinning
# threads fight a busy neighbour for its core (16K run with one busy core: 95 s active, 36 s
# passive; idle 28 vs 32 s; scripts/bench/threads.py, docs/benchmarks.md). Read once, when torch
# starts its OpenMP pool, so it is set here before anything imports torch; the user's value wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

USAGE = __doc__
# Hydra's shell-completion script calls the app with `-sc query=bash` and no command: it is `run`'s.
COMPLETION_FLAGS = ("-sc", "--shell-completion")


def _ls(argv: list[str]) -> int:
    from memexp.core.compose import GROUPS, group_options
    from memexp.core.registry import RECIPES
    from memexp.core.schema import ConfigError

    if argv:
        raise ConfigError(f"ls takes no arguments (got {argv[0]!r}); `python -m memexp run --help` lists the "
                          f"fields of a run")
    for group in GROUPS:
        print(f"{group}: {', '.join(group_options(group)) or '(none)'}")
    print(f"recipe (python -m memexp train): {', '.join(RECIPES.names()) or '(none)'}")
    return 0


def _pop_flag(argv: list[str], flag: str) -> bool:
    if flag in argv:
        argv.remove(flag)
        return True
    return False


# `memexp cost`'s counts: name -> (integer only, lowest value). Each is spelled --name-with-dashes=V,
# --name-with-dashes V or name=V (the spelling before issue 52); cost_report takes them by name.
COST_OPTIONS = {"length": (True, 1), "question_tokens": (False, 0), "output_tokens": (True, 0),
                "replay_tokens": (False, 0), "notes": (False, 0), "archived_tokens": (False, 0),
                "helper_mib": (False, 0)}
# each option's count in cost_report's `inputs.basis`
COUNT_NAMES = {"length": "context", "question_tokens": "question", "output_tokens": "output",
               "replay_tokens": "replay", "notes": "notes", "archived_tokens": "archived", "helper_mib": "helper"}


def _pop_count(argv: list[str], name: str) -> int | float | None:
    """The value of cost option `name` taken out of argv, or None; a value that is not a number of
    its kind, or is below its lowest, stops with one line naming the option as it was spelled."""
    from memexp.core.schema import ConfigError

    integer, low = COST_OPTIONS[name]
    dashed = "--" + name.replace("_", "-")
    for k, a in enumerate(argv):
        if a == dashed:
            if k + 1 == len(argv):
                raise ConfigError(f"{dashed}: needs a value ({dashed}=N)")
            spelled, value = dashed, argv[k + 1]
            del argv[k:k + 2]
            break
        if a.startswith((name + "=", dashed + "=")):
            spelled, value = a.split("=", 1)
            del argv[k]
            break
    else:
        return None
    try:
        number = float(value)  # 1e6 and 131072 alike
    except ValueError:
        number = None
    if number is None or number != number or (integer and not number.is_integer()):
        raise ConfigError(f"{spelled}={value!r}: must be {'an integer' if integer else 'a number'}")
    if number < low:
        raise ConfigError(f"{spelled}={value}: must be a number >= {low}")
    return int(number) if integer else number


def _recorded_counts(folder: str, length: int | None) -> tuple[object, dict[str, float], dict[str, str]]:
    """A run folder's config, its records' mean counts at one recorded length (`length=` chooses
    among several) as cost_report's keywords, and each count's basis ("measured: mean of n records")."""
    from omegaconf import OmegaConf

    from memexp.core.schema import ConfigError, validate
    from memexp.report.figures import recorded_counts
    from memexp.results.runs import find_runs

    runs = find_runs([Path(folder)])
    if len(runs) != 1:
        raise ConfigError(f"{folder}: {'no run folder' if not runs else f'{len(runs)} run folders'} "
                          f"(config.yaml with records.jsonl); name one run folder")
    run = runs[0]
    means = recorded_counts(run)
    if not means:
        raise ConfigError(f"{folder}: no records to measure counts from")
    if length is None and len(means) > 1:
        raise ConfigError(f"{folder}: records at lengths {', '.join(means)}; choose one with length=N")
    key = str(length) if length is not None else next(iter(means))
    if key not in means:
        raise ConfigError(f"length={length}: no records at that length in {folder} (recorded: {', '.join(means)})")
    n = sum(1 for r in run.records if str(r["length"]) == key)
    counts = {k: v for k, v in means[key].items() if v is not None}
    for k in ("length", "output_tokens"):  # integers in Eq. 12 (steps, predictions)
        if k in counts:
            counts[k] = round(counts[k])
    basis = {COUNT_NAMES[k]: f"measured: mean of {n} record{'s' * (n != 1)} at length {key}" for k in counts}
    return validate(OmegaConf.create(run.config)), counts, basis


def _cost(argv: list[str]) -> int:
    import json

    from memexp.cli.help import reject_flags
    from memexp.core.compose import load_config
    from memexp.core.schema import ConfigError
    from memexp.costs.report import MIB, cost_report, format_cost_table

    as_json = _pop_flag(argv, "--json")
    given = {name: v for name in COST_OPTIONS if (v := _pop_count(argv, name)) is not None}
    folder = argv.pop(0) if argv and "=" not in argv[0] and Path(argv[0]).is_dir() else None
    reject_flags(argv, "cost", "--json, " + ", ".join("--" + n.replace("_", "-") for n in COST_OPTIONS))
    counts: dict = {"length": 1_048_576}
    basis: dict[str, str] = {}
    if folder is None:
        cfg = load_config(argv)
    else:  # the run's own configuration, at its records' means; given options still win
        if argv:
            raise ConfigError(f"{argv[0]}: with a run folder the configuration is the run's own; cost takes "
                              f"only its options there (`python -m memexp cost --help`)")
        cfg, measured, basis = _recorded_counts(folder, given.pop("length", None))
        counts.update(measured)
    counts.update(given)
    for name in given:  # a given count is labelled "given", even where the records measured it
        basis.pop(COUNT_NAMES[name], None)
    helper_mib = counts.pop("helper_mib", None)
    report = cost_report(cfg, helper_bytes=None if helper_mib is None else helper_mib * MIB, basis=basis, **counts)
    print(json.dumps(report, indent=2) if as_json else format_cost_table(report))
    return 0


def _latency(argv: list[str]) -> int:
    from memexp.cli.latency import main as latency_main

    return latency_main(argv)


def _data(argv: list[str]) -> int:
    from memexp.cli.data import download
    from memexp.cli.help import reject_flags
    from memexp.core.compose import load_config
    from memexp.core.paths import rebase_cache, use_root
    from memexp.run.checks import check_cache_writable

    reject_flags(argv, "data", "none")
    if any(a.startswith("recipe=") for a in argv):  # a training recipe's data (memexp.cli.data.download_recipe)
        from memexp.cli.data import download_recipe

        print(f"[memexp] recipe data cached at {download_recipe(argv)}")
        return 0
    cfg = load_config(argv)
    use_root(cfg.paths.root)
    bench = rebase_cache(cfg.bench)
    check_cache_writable(bench)
    path = download(bench)
    print(f"[memexp] {cfg.bench.name} cached at {path}")
    return 0


def _run(argv: list[str]) -> int:
    from memexp.cli.app import hydra_run

    return hydra_run(argv)


def _train(argv: list[str]) -> int:
    from memexp.cli.train import main as train_main

    return train_main(argv)


def _report(argv: list[str]) -> int:
    from memexp.report import main as report_main

    return report_main(argv)


def _browse(argv: list[str]) -> int:
    from memexp.report.browse import main as browse_main

    return browse_main(argv)


def _convert(argv: list[str]) -> int:
    from memexp.convert import main as convert_main

    return convert_main(argv)


def _status(argv: list[str]) -> int:
    from memexp.cluster.status import main as status_main

    return status_main(argv)


def _dashboard(argv: list[str]) -> int:
    from memexp.report.dashboard import main as dashboard_main

    return dashboard_main(argv)


def _lm_eval(argv: list[str]) -> int:
    from memexp.lmeval.cli import main as lm_eval_main

    return lm_eval_main(argv)


def _help(command: str) -> str:
    from memexp.cli.help import command_help

    return command_help(command)


COMMANDS = {"run": _run, "train": _train, "ls": _ls, "cost": _cost, "latency": _latency, "data": _data, "report": _report,
            "browse": _browse, "convert": _convert, "status": _status, "dashboard": _dashboard, "lm-eval": _lm_eval}


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command line, not a caller in Python: Ctrl-C at any moment is one line, exit 130
        from memexp.core import interrupts
        line = "interrupted"
        if sys.argv[1:2] == ["run"]:
            sweep = any(a in ("-m", "--multirun") for a in sys.argv)
            line = ("interrupted; the same command resumes every run of the sweep where it stopped" if sweep
                    else "interrupted before any question was recorded")
        interrupts.install(line)
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if argv[0] in COMPLETION_FLAGS:
        argv = ["run", *argv]
    command, rest = argv[0], argv[1:]
    # run's help is Hydra's (its template in conf/config.yaml); report's is its argparse's
    if command not in ("run", "report", "browse", "convert") and any(a in ("-h", "--help") for a in rest):
        if command in COMMANDS:
            print(_help(command))
            return 0
    if command not in COMMANDS:
        print(f"memexp: unknown command {command!r}; allowed commands are {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[command](rest)
    except BrokenPipeError:  # the reader left (`memexp ls | head`): nothing more to say, as for `ls | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except BaseException as e:  # one line for what the user can fix (memexp.core.errors); bugs re-raise
        from memexp.core.errors import command_line, exit_code

        return exit_code(e, command_line(command, rest), command)

