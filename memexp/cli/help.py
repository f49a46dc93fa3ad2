"""`python -m memexp <command> --help` for the commands that are not Hydra apps: what each takes
(its own options, then the run overrides it composes), and an example. `run --help` is Hydra's,
with memexp's template (conf/config.yaml hydra.help)."""

from __future__ import annotations

from dataclasses import MISSING, fields, is_dataclass

RUN_OVERRIDES = ("  Run overrides: every group=option and field=value `python -m memexp run` takes\n"
                 "  (`python -m memexp run --help` lists them; `python -m memexp ls` lists the options).")


def _options(rows: list[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"  {name:<{width}}  {text}" for name, text in rows)


def _groups() -> str:
    from memexp.core.compose import GROUPS, group_options

    return "\n".join(f"  {g}: {', '.join(group_options(g))}" for g in GROUPS if g != "hydra/launcher")


def _fields(obj: object, prefix: str = "") -> list[tuple[str, str]]:
    """(dot path, value) of every field of a recipe, nested dataclasses and list items included."""
    rows: list[tuple[str, str]] = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        path = f"{prefix}{f.name}"
        if is_dataclass(value):
            rows += _fields(value, path + ".")
        elif isinstance(value, list) and value and is_dataclass(value[0]):
            for i, item in enumerate(value):
                rows += _fields(item, f"{path}.{i}.")
        else:
            rows.append((path, repr(value) if f.default is not MISSING or value is not None else "(required)"))
    return rows


def _train() -> str:
    from memexp.cli.train import load_recipe
    from memexp.core.registry import RECIPES

    recipe, _ = load_recipe([])
    return ("python -m memexp train [recipe=<name>] [field=value ...]: run a training recipe.\n\n"
            f"  recipe: {', '.join(RECIPES.names())} (conf/recipe/<name>.yaml, with <name>_<backbone>.yaml for "
            f"the recipe's backbone=)\n\n"
            "Fields of recipe=tiny_gdn (dot paths; list items by index):\n" + _options(_fields(recipe)) +
            "\n\nExample:\n  python -m memexp train recipe=tiny_gdn seed=1 stages.0.steps=2 output=/tmp/ckpt")


def _cost() -> str:
    from memexp.costs.report import PAPER_OUTPUT_TOKENS, PAPER_QUESTION_TOKENS

    return ("python -m memexp cost [RUN_FOLDER] [options] [run overrides]: analytical FLOPs and persistent\n"
            "storage of a configuration (NoteBank App. C.6/C.7); no model runs. Each figure is printed with\n"
            "the counts it used and whether each was given, measured, bounded or assumed. RUN_FOLDER: the\n"
            "run's own configuration at its records' mean counts (length=N picks a recorded length).\n"
            "Each option is also spelled --name N or name=N (question_tokens=N).\n\n" + _options([
                ("length=N", "context tokens T (default 1048576)"),
                ("--question-tokens=N", f"question tokens |Q| (default {PAPER_QUESTION_TOKENS}, the paper's GDN "
                                        f"questions)"),
                ("--output-tokens=N", f"generated tokens |Y| (default {PAPER_OUTPUT_TOKENS})"),
                ("--replay-tokens=N", "replayed tokens |R| (default the bound R * B)"),
                ("--notes=N", "notes N_T (default the bound W * floor(T / C); ceil with method.write_tail)"),
                ("--archived-tokens=N", "archived tokens U (default the bound N_T * B)"),
                ("--helper-mib=X", "resident helper tensors in MiB (default memexp's own, J * d_rho int64; "
                                   "the paper's: 0.402)"),
                ("--json", "print the report as JSON"),
            ]) + "\n" + RUN_OVERRIDES + "\n\nExamples:\n"
            "  python -m memexp cost backbone=gdn method=notebank length=131072 --json\n"
            "  python -m memexp cost outputs/runs/ruler/gdn/notebank/<hash> length=1048576")


def _latency() -> str:
    return ("python -m memexp latency [options] [run overrides]: measured Plain vs NoteBank latency and peak\n"
            "memory (NoteBank App. C.5); method.* overrides configure NoteBank. With method=infllm: Table 7's\n"
            "Transformer rows, Full, SW<sw_window> and InfLLM, each on its own backbone.\n\n" + _options([
                ("lengths=A,B,...", "context lengths (default 4096,16384,65536)"),
                ("repeats=N", "timed repeats per length (default 3)"),
                ("new_tokens=N", "generated tokens per question (default 32)"),
                ("inputs=ruler|synthetic", "RULER examples or synthetic tokens (default ruler)"),
                ("sw_window=N", "with method=infllm: the sliding window of the SW row (default 4096)"),
                ("--json", "print the measurements as JSON"),
            ]) + "\n" + RUN_OVERRIDES + "\n\nExample:\n"
            "  python -m memexp latency backbone=tiny_gdn lengths=1024,4096 repeats=1")


def _data() -> str:
    return ("python -m memexp data bench=<name> [run overrides]: download and cache a benchmark's data\n"
            "(into its bench.cache_dir, under the paths root) for offline runs.\n\n"
            "Config groups:\n" + _groups() + "\n" + RUN_OVERRIDES + "\n\nExample:\n"
            "  python -m memexp data bench=longbench")


def _ls() -> str:
    return ("python -m memexp ls: list the options of every config group (the YAML files under\n"
            "memexp/conf, registered methods and benchmarks, the launchers).\n\nExample:\n  python -m memexp ls")


def _dashboard() -> str:
    from memexp.report.dashboard import _parser

    return (_parser().format_help() + "\nExample:\n  python -m memexp dashboard --entity my-team --project memexp "
            "--runs outputs/runs\n  WANDB_MODE=offline python -m memexp dashboard --out spec.json   "
            "# print and save the spec only")


def _lm_eval() -> str:
    return ("python -m memexp lm-eval [lm-eval run options]: lm-evaluation-harness with --model memexp.\n"
            "Every `lm-eval run` option works (`lm-eval run --help` lists them); memexp reads --model_args:\n"
            "  backbone=<option>, method=<option>, and dotted fields (method.replay_budget=4, backbone.dtype=...),\n"
            "  kernels, threads, output_dir, progress: memexp's run fields, validated before any model loads\n"
            "  split=auto|last_line|none|doc_field:<name>: where a prompt's context ends and its question begins\n"
            "  max_length=N: refuse (never truncate) longer inputs; run_dir=DIR: memexp's run folder\n\n"
            "Example:\n  python -m memexp lm-eval --model_args backbone=tiny_gdn,method=notebank "
            "--tasks niah_single_1 --metadata '{\"max_seq_lengths\": [1024]}' --limit 8")


def reject_flags(argv: list[str], command: str, flags: str) -> None:
    """What is left of a command's argv goes to Hydra as overrides: a mistyped flag (--jsn) is
    named here, with the command's own flags, instead of as Hydra's lexer error."""
    from memexp.core.schema import ConfigError

    for a in argv:
        if a.startswith("-"):
            raise ConfigError(f"{a}: not an option of {command} (its options: {flags}; "
                              f"`python -m memexp {command} --help` describes them)")


def _status() -> str:
    from memexp.cluster import status

    return ("python -m memexp status SWEEP_FOLDER: " + status.__doc__.split("\n", 2)[2] +
            "\nExample:\n  python -m memexp status outputs/multirun/2025-01-31_12-00-00")


HELP = {"train": _train, "cost": _cost, "latency": _latency, "data": _data, "ls": _ls, "dashboard": _dashboard,
        "lm-eval": _lm_eval, "status": _status}


def command_help(command: str) -> str:
    return HELP[command]()
