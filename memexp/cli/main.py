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


def _pop_int(argv: list[str], key: str, default: int | None) -> int | None:
    from memexp.core.schema import ConfigError

    for a in list(argv):
        if a.startswith(key + "="):
            argv.remove(a)
            value = a.split("=", 1)[1]
            try:
                number = float(value)  # 1e6 and 131072 alike
            except ValueError:
                number = None
            if number is None or not number.is_integer():
                raise ConfigError(f"{key}={value!r}: must be an integer")
            return int(number)
    return default


def _cost(argv: list[str]) -> int:
    import json

    from memexp.cli.help import reject_flags
    from memexp.core.compose import load_config
    from memexp.costs.report import PAPER_OUTPUT_TOKENS, PAPER_QUESTION_TOKENS, cost_report, format_cost_table

    as_json = _pop_flag(argv, "--json")
    length = _pop_int(argv, "length", 1_048_576)
    question = _pop_int(argv, "question_tokens", PAPER_QUESTION_TOKENS)
    output = _pop_int(argv, "output_tokens", PAPER_OUTPUT_TOKENS)
    replay = _pop_int(argv, "replay_tokens", None)  # measured |R|; default the bound R * B
    reject_flags(argv, "cost", "--json")
    cfg = load_config(argv)
    report = cost_report(cfg, length=length, question_tokens=question, output_tokens=output, replay_tokens=replay)
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

