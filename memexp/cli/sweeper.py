"""A multirun sweep launched by groups of jobs that share their reads (memexp.run.groups).

The sweeper expands the command line into the same jobs as Hydra's basic sweeper, composes each,
and groups them. A sweep with no group of two launches exactly as the basic sweeper does. Otherwise
every group becomes one launched job (one process, one SLURM array task), whatever the launcher:

- the launched job `k` is group `k`'s first job, numbered k; the group's other jobs are numbered
  after every group's first job, and their job folders (`<sweep>/<num>/.hydra/overrides.yaml`) are
  written here, before the launch, so `memexp status` lists every job from the start;
- `<sweep>/shared_reads.json` (memexp.run.groups.write_plan) names each group's jobs (number,
  overrides, composed configuration); the launched job reads it (`group_for_job`) and runs them with
  memexp.run.runner.run_group, each job keeping its own run folder, key, lock, records, summary and
  logger run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Sequence

import yaml
from omegaconf import OmegaConf


def grouped_sweep(sweeper: Any, arguments: list[str]) -> Any:
    """`BasicSweeper.sweep` with each group of jobs launched as one job (`sweeper`: a BasicSweeper)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from memexp.core.compose import without_hydra
    from memexp.core.schema import validate
    from memexp.run.groups import PLAN, check_groups, plan_groups, write_plan
    from memexp.run.jobs import SWEEP_JOBS_ENV

    sweep_dir = Path(str(sweeper.config.hydra.sweep.dir))
    parser = OverridesParser.create(config_loader=sweeper.hydra_context.config_loader)
    params = [*sweeper._parse_config(), *arguments]
    jobs = sweeper.split_arguments(parser.parse_overrides(params), None)[0]
    loader = sweeper.hydra_context.config_loader
    composed = [without_hydra(loader.load_sweep_config(sweeper.config, list(job))) for job in jobs]
    cfgs = [validate(cfg) for cfg in composed]
    groups = plan_groups(cfgs)
    (sweep_dir / PLAN).unlink(missing_ok=True)  # a plan left by an earlier sweep into this folder
    if all(len(members) == 1 for members in groups):
        return BasicSweeper.sweep(sweeper, arguments)
    check_groups(cfgs, groups)
    numbers = _numbers(groups)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(sweeper.config, sweep_dir / "multirun.yaml")
    plan = [[{"num": numbers[i], "overrides": list(jobs[i]),
              "config": OmegaConf.to_container(composed[i], resolve=True)} for i in members] for members in groups]
    for members in plan:
        for job in members[1:]:
            _write_job_folder(sweep_dir / str(job["num"]), job["overrides"])
    write_plan(sweep_dir, plan)
    os.environ[SWEEP_JOBS_ENV] = str(len(groups))  # the launcher runs groups, not jobs, at once
    shared = sum(len(members) for members in groups if len(members) > 1)
    print(f"[memexp] {len(jobs)} jobs launched as {len(groups)}: {shared} of them share their reads in "
          f"{sum(len(members) > 1 for members in groups)} group(s) ({sweep_dir / PLAN}); share_reads=false "
          f"launches each alone", file=sys.stderr)
    batch = [list(jobs[members[0]]) for members in groups]
    size = sweeper.max_batch_size or len(batch)
    returns = []
    for start in range(0, len(batch), size):
        results = sweeper.launcher.launch(batch[start : start + size], initial_job_idx=start)
        for r in results:
            _ = r.return_value  # a failed job raises here, as in the basic sweeper
        returns.append(results)
    return returns


def _numbers(groups: Sequence[Sequence[int]]) -> dict[int, int]:
    """Job index -> job number: each group's first job numbered as its group, the rest after them."""
    numbers = {members[0]: k for k, members in enumerate(groups)}
    following = [i for members in groups for i in members[1:]]
    numbers.update({i: len(groups) + k for k, i in enumerate(following)})
    return numbers


def _write_job_folder(folder: Path, overrides: list[str]) -> None:
    """A job folder as Hydra writes one (its overrides), for a job its group's launched job runs."""
    (folder / ".hydra").mkdir(parents=True, exist_ok=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(list(overrides), sort_keys=False))


def group_for_job(sweep_dir: Path, num: int, overrides: list[str]) -> list[dict] | None:
    """The jobs launched job `num` of the sweep runs (its own first): number, overrides, config;
    None for a sweep launched without groups, or for a job (`overrides`) that is not the plan's
    (a plan left in a sweep folder that a later sweep launched into without groups)."""
    from memexp.run.groups import read_plan

    plan = read_plan(sweep_dir)
    if plan is None or not 0 <= num < len(plan) or plan[num][0]["overrides"] != list(overrides):
        return None
    return plan[num]


def job_configs(group: list[dict]) -> list:
    """Each job's validated RunConfig, from the configurations the sweeper composed."""
    from memexp.core.schema import validate

    return [validate(OmegaConf.create(job["config"])) for job in group]
