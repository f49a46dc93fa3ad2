"""Weights & Biases sink. Local records are always written first; W&B never fails a run.

`logger=wandb` goes online when credentials exist, offline otherwise (`logger.mode=auto`);
any error talking to W&B is reported once and the run continues with local records only.
"""

from __future__ import annotations

import netrc
import os
import sys
from pathlib import Path
from typing import Any

from memexp.config import LoggerConfig
from memexp.records import Record


def has_wandb_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        auth = netrc.netrc().authenticators("api.wandb.ai")
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False
    return auth is not None


def resolve_mode(cfg: LoggerConfig) -> str:
    if os.environ.get("WANDB_MODE") in ("offline", "disabled", "dryrun"):
        return "offline" if os.environ["WANDB_MODE"] == "dryrun" else os.environ["WANDB_MODE"]
    if cfg.mode != "auto":
        return cfg.mode
    return "online" if has_wandb_credentials() else "offline"


class NullSink:
    def log_record(self, record: Record) -> None:
        pass

    def finish(self, summary: dict) -> None:
        pass


class WandbSink:
    """Config, a per-question table, summary metrics `<bench>/<task>/<length>/<metric>`,
    tags for backbone/method/bench, group = the sweep."""

    COLUMNS = ("example_id", "question_id", "task", "length", "score", "prediction", "references", "context_tokens")

    def __init__(self, cfg: LoggerConfig, run_dir: Path, config: dict, name: str, tags: list[str],
                 group: str | None, run_id: str | None) -> None:
        self.run = None
        self.rows: list[list[Any]] = []
        self.bench = config["bench"]["name"]
        mode = resolve_mode(cfg)
        try:
            import wandb

            self._wandb = wandb
            self.run = wandb.init(
                project=cfg.project, entity=cfg.entity, group=cfg.group or group, name=name,
                tags=list(dict.fromkeys([*tags, *cfg.tags])), config=config, dir=str(run_dir), mode=mode,
                id=run_id, resume="allow", reinit="finish_previous",
                settings=wandb.Settings(init_timeout=30, silent=True),
            )
        except Exception as e:  # any W&B failure leaves the local records as the result
            print(f"[memexp] W&B unavailable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                  "continuing with local records only", file=sys.stderr)
            self.run = None

    @property
    def run_id(self) -> str | None:
        return None if self.run is None else self.run.id

    def log_record(self, record: Record) -> None:
        if self.run is None:
            return
        row = {**record.to_json(), "context_tokens": record.tokens.get("context"),
               "references": " | ".join(map(str, record.references))}
        self.rows.append([row[c] for c in self.COLUMNS])
        try:
            self.run.log({f"{self.bench}/score": record.score})
        except Exception:
            pass

    def finish(self, summary: dict) -> None:
        if self.run is None:
            return
        try:
            metrics: dict[str, float] = {}
            for task, row in summary.get("scores", {}).items():
                for length, value in row.items():
                    metrics[f"{self.bench}/{task}/{length}/score"] = value
            if summary.get("overall") is not None:
                metrics[f"{self.bench}/overall/score"] = summary["overall"]
            for key, value in summary.items():
                if key.startswith(("mean_", "aggregate/")) or key == "added_flops_ratio":
                    metrics[f"{self.bench}/{key}"] = value
            self.run.summary.update(metrics)
            self.run.log({f"{self.bench}/records": self._wandb.Table(columns=list(self.COLUMNS), data=self.rows)})
            self.run.finish()
        except Exception as e:
            print(f"[memexp] W&B logging failed at finish ({type(e).__name__}); local records are complete",
                  file=sys.stderr)


def make_sink(cfg: LoggerConfig, run_dir: Path, config: dict, name: str, tags: list[str],
              group: str | None, run_id: str | None):
    if cfg.name == "none":
        return NullSink()
    return WandbSink(cfg, run_dir, config, name, tags, group, run_id)
