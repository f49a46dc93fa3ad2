"""The `run` app: Hydra's main around the runner, and the checks of every job before anything loads
(composition itself is memexp.core.compose).

Every job of a command line (each point of a multirun sweep too) is composed and validated
up front, so a wrong value stops the command with one line before any model loads.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from memexp.core.compose import (
    PRIMARY,
    check_launcher,
    check_launcher_needs_multirun,
    compose,
    first_sweep_value,
    load_config,
    parse_overrides,
    quote_home,
    store_options,
    sweep_jobs,
    sweep_or_list_message,
    without_hydra,
)
from memexp.core.errors import command_line, exit_code
from memexp.core.schema import (
    ConfigError,
    validate,
)


class CheckedJobs(list):
    """The validated jobs of a command line; `grouped`: a sweep of Hydra's basic sweeper whose jobs
    share reads, launched by memexp's sweeper instead (memexp.cli.sweeper)."""

    grouped: bool = False


def preflight(overrides: list[str], multirun: bool, files: bool = True, **where: str | None) -> CheckedJobs:
    """Compose and validate every job of the command line before anything loads; ConfigError names
    the first bad field. Jobs of a sweeper that picks values as it goes (Optuna) are checked with
    one value of each swept field here, and each trial again in the task function. `files=False`
    (`--cfg`, `--info`) checks values only: no checkpoint, data file, folder or GPU is looked at."""
    if not files:
        from memexp.core.schema import without_file_checks
        from memexp.run.checks import check_values

        with without_file_checks():
            return _preflight(overrides, multirun, check_values, **where)
    from memexp.run.checks import check_run

    return _preflight(overrides, multirun, check_run, **where)


def _preflight(overrides: list[str], multirun: bool, check, **where: str | None) -> CheckedJobs:
    import os

    from memexp.run.checks import check_launcher_environment
    from memexp.run.jobs import SWEEP_JOBS_ENV

    check_launcher(overrides)
    check_launcher_environment(overrides)
    parsed = parse_overrides(overrides)
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    base = compose(fixed, with_hydra=True, **where)
    multirun = multirun or getattr(base.hydra.mode, "name", None) == "MULTIRUN"  # e.g. set by hparams_search
    swept = [o for o in parsed if o.is_sweep_override()]
    check_launcher_needs_multirun(parsed, multirun)
    if swept and not multirun:
        key, _, value = swept[0].input_line.lstrip("+~").partition("=")
        raise ConfigError(sweep_or_list_message(key, value))
    if not multirun:
        cfgs = CheckedJobs([validate(without_hydra(base))])
        check(cfgs[0])
        return cfgs
    sweeper = base.hydra.sweeper
    params = OmegaConf.to_container(sweeper.params) if sweeper.get("params") else {}
    basic = str(sweeper.get("_target_", "")).endswith(("BasicSweeper", "SharedReadsSweeper"))
    if basic:
        jobs = sweep_jobs(overrides, params)
    else:
        given = {o.get_key_element() for o in parsed}
        samples = swept + parse_overrides([f"{k}={v}" for k, v in params.items() if k not in given])
        jobs = [fixed + [f"{o.get_key_element()}={first_sweep_value(o)}" for o in samples]]
    cfgs = CheckedJobs(load_config(job, **where) for job in jobs)
    for cfg in cfgs:
        check(cfg)
    launched = len(jobs)
    if basic:  # the jobs that share their reads run as one (memexp.cli.sweeper)
        from memexp.run.groups import check_groups, plan_groups

        groups = plan_groups(cfgs)
        check_groups(cfgs, groups)
        launched = len(groups)
        cfgs.grouped = launched < len(jobs)
    os.environ[SWEEP_JOBS_ENV] = str(launched if launched > 1 else sweeper.get("n_jobs") or 1)
    return cfgs


def run_job(cfg: DictConfig) -> float:
    """Hydra's task function: one run, validated before anything loads; returns its metric (the
    overall score by default) for sweepers such as Optuna. A sweep's job folder points at the
    run folder (memexp.run.jobs). A job launched for a group of jobs that share their reads
    (memexp.cli.sweeper) runs every job of the group and returns its own job's metric."""
    import math
    from dataclasses import replace

    from hydra.core.hydra_config import HydraConfig

    from memexp.cli.sweeper import group_for_job, job_configs
    from memexp.cluster.job_failure import clear_failure, in_launcher_worker, record_failure
    from memexp.cluster.requeue import harden_requeue
    from memexp.core.errors import classify
    from memexp.core.paths import use_root
    from memexp.run.jobs import job_threads, link_run_folder, metric_value
    from memexp.run.records import run_folder
    from memexp.run.runner import run_group
    from memexp.run.tracking import label_overrides

    hc = HydraConfig.get()
    multirun = hc.mode.name == "MULTIRUN"
    if in_launcher_worker():
        harden_requeue()
    job_dir = Path(hc.runtime.output_dir)
    group = group_for_job(Path(hc.sweep.dir), hc.job.num, list(hc.overrides.task)) if multirun else None
    folders = [job_dir] + [job_dir.parent / str(job["num"]) for job in (group or [])[1:]]
    try:
        rcs = job_configs(group) if group else [validate(cfg)]
        use_root(rcs[0].paths.root)
        rcs = [replace(rc, threads=job_threads(rc.threads, hc.launcher)) for rc in rcs]
        overrides = [job["overrides"] for job in group] if group else [list(hc.overrides.task)]
        if multirun:
            for folder, rc in zip(folders, rcs):
                link_run_folder(folder, run_folder(rc))
                clear_failure(folder)
        summaries = run_group(rcs, sweep_group=Path(hc.sweep.dir).name if multirun else None,
                              labels=[label_overrides(o, _swept() if multirun else None) for o in overrides])
        return metric_value(summaries[0], rcs[0].metric)
    except BaseException as e:  # one line for what the user can fix (memexp.core.errors); bugs re-raise
        code = exit_code(e, command_line("run", sys.argv[1:]))
        if multirun and code in (1, 2) and in_launcher_worker():  # the sweep names it when it ends
            for folder in folders:
                record_failure(folder, classify(e, "")[1])
            return math.nan
        raise SystemExit(code) from None


SHARED_READS_SWEEPER = "hydra/sweeper=shared_reads"  # conf/hydra/sweeper/shared_reads.yaml
SWEPT_ENV = "MEMEXP_SWEPT_KEYS"  # the fields a sweep varies, handed to its jobs (W&B run names)


def _remember_swept(overrides: list[str]) -> None:
    """The keys whose values differ between the jobs of this command line's sweep, for the jobs'
    W&B names; a sweeper that picks values as it goes (Optuna) names every field instead."""
    import json
    import os

    from memexp.run.tracking import swept_keys

    user = [o for o in overrides if not o.startswith(("hydra.", "hydra/"))]
    try:
        os.environ[SWEPT_ENV] = json.dumps(sorted(swept_keys(sweep_jobs(user))))
    except Exception:  # a syntax only the sweeper itself expands (interval()): no shortlist, every field
        os.environ.pop(SWEPT_ENV, None)


def _swept() -> set[str] | None:
    import json
    import os

    return set(json.loads(os.environ[SWEPT_ENV])) if SWEPT_ENV in os.environ else None


def _hydra_args(argv: list[str]):
    """Hydra's own flags and overrides, in any order: `run progress=false -m method=a,b` too. Hydra's
    parser (plain parse_args) refuses a flag after the first override, so `hydra_run` hands Hydra
    `flags_first(argv)`."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser().parse_intermixed_args(argv)


def flags_first(argv: list[str], overrides: list[str]) -> list[str]:
    """argv with its overrides (as parsed, in their order) moved after every flag and flag value."""
    flags = list(argv)
    for override in overrides:
        flags.remove(override)
    return flags + overrides


def hydra_run(argv: list[str]) -> int:
    """`python -m memexp run [hydra flags] overrides...` through Hydra's own command line (every
    flag Hydra documents; launchers, sweepers), after memexp's pre-check of every job."""
    import os

    import hydra

    argv = quote_home(argv)
    args = _hydra_args(argv)
    where = {"config_dir": args.config_dir, "config_path": args.config_path}
    if not (args.help or args.hydra_help or args.shell_completion):
        # --cfg / --info only show the config: nothing on disk is needed (the run's own checks come
        # when a run starts)
        inspect = bool(args.cfg or args.info)
        try:
            jobs = preflight(args.overrides, args.multirun, files=not inspect,
                             config_name=args.config_name or "config", **where)
        except ConfigError as e:
            print(f"memexp: {e}", file=sys.stderr)
            return 2
        if jobs.grouped and not inspect and SHARED_READS_SWEEPER not in args.overrides:
            # Hydra's basic sweeper would launch each job alone: memexp's launches each group as one
            argv, args.overrides = [*argv, SHARED_READS_SWEEPER], [*args.overrides, SHARED_READS_SWEEPER]
    if args.multirun:
        _remember_swept(args.overrides)
    if args.shell_completion and "COMP_LINE" in os.environ:
        # the completion script sends the whole line; Hydra completes what follows the app's name
        os.environ["COMP_LINE"] = re.sub(r"^(\S*memexp)\s+run\b", r"\1", os.environ["COMP_LINE"])

    store_options()
    _register_sweeper()
    _quiet_optuna(args.overrides)
    saved = sys.argv
    # the name shell completion installs for: the `memexp` console script (with `run` added back
    # by memexp.__main__ when a completion query arrives without it)
    sys.argv = ["memexp", *flags_first(argv, args.overrides)]
    # a launcher's error reaches us (not Hydra's traceback printer): a refused submission is one line
    from memexp.cluster.submission import WithoutSbatchEcho

    full_error = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    stderr = sys.stderr
    if args.multirun:
        sys.stderr = WithoutSbatchEcho(stderr)
    try:
        hydra.main(version_base="1.3", config_path=PRIMARY, config_name="config")(run_job)()
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    except Exception as e:
        from memexp.cluster.submission import refused_submission, remove_unsubmitted_sweep, submission_line

        failure = refused_submission(e)
        if failure is None:
            raise
        remove_unsubmitted_sweep()
        print(f"memexp: {submission_line(failure)}", file=sys.stderr)
        return 1
    finally:
        sys.argv, sys.stderr = saved, stderr
        if full_error is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = full_error
    return 0


def _register_sweeper() -> None:
    """memexp's sweeper (conf/hydra/sweeper/shared_reads.yaml) by hand: Hydra discovers plugins by
    walking the hydra_plugins folders on sys.path, which an editable install does not put there."""
    from hydra.core.plugins import Plugins

    from hydra_plugins.memexp_shared_reads.sweeper import SharedReadsSweeper

    Plugins.instance().register(SharedReadsSweeper)


def _quiet_optuna(overrides: list[str]) -> None:
    """Optuna logs its study's creation and every trial at INFO on its own handler; Hydra's
    sweeper already prints the trials and the best values."""
    if any(o.startswith(("hparams_search=", "hydra/sweeper=optuna", "+hparams_search=")) for o in overrides):
        try:
            import optuna
        except ImportError:
            return
        optuna.logging.set_verbosity(optuna.logging.WARNING)


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg)
