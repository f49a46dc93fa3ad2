"""The README's code blocks run, and every page that claims an output prints it.

- Every `$ command` block of the README and of the site's pages (docs/, the lab notebook apart: its
  figures are dated history) is run and its claimed output lines must appear, in order, in what the
  command prints. Commands that load a model are `slow`.
- Every command block of the README is checked: `python -m memexp run ...` composes and validates
  (`--cfg job`, each value of a sweep), another subcommand accepts every `--flag` the line uses,
  `make X` is a Makefile target and `pip install -e ".[x]"` names an extra of pyproject.toml.
- The README's folder listing names the files a run folder holds.
"""

from __future__ import annotations

import inspect
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import blocks, claims, joined, shown_in_order, split_env, strip_comment

from memexp.run import records

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = sorted(p for p in (REPO / "docs").rglob("*.md") if "lab-notebook" not in p.parts)
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled",
       "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
ERROR_PREFIX = "memexp: "


def memexp(args: list[str], cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memexp", *args], cwd=cwd, env={**ENV, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def memexp_args(words: list[str]) -> list[str]:
    assert words[:3] == ["python", "-m", "memexp"], f"not a memexp command: {' '.join(words)}"
    return words[3:]


def all_claims():
    for page in [README, *PAGES]:
        for block in blocks(page):
            if block.kind == "claim":
                for claim in claims(block):
                    cheap = claim.output and claim.output[0].startswith(ERROR_PREFIX)
                    cheap = cheap or any(flag in claim.command for flag in ("--info", "--cfg", " ls"))
                    marks = [] if cheap else [pytest.mark.slow]
                    yield pytest.param(block, claim, marks=marks, id=f"{block.where()}:{claim.command[:60]}")


@pytest.mark.parametrize("block,claim", list(all_claims()))
def test_a_claimed_output_is_what_the_command_prints(block, claim, tmp_path):
    env, words = split_env(claim.command)
    if "lm-eval" in words:
        pytest.importorskip("lm_eval")
    result = memexp(memexp_args(words), tmp_path, env)
    printed = (result.stdout + result.stderr).splitlines()
    missing = shown_in_order(claim.output, printed)
    assert missing is None, (f"{block.where()}: `{claim.command}` did not print {missing!r}; it printed:\n"
                             + "\n".join(printed[-40:]))


def readme_commands() -> list[tuple[str, str]]:
    out = []
    for block in blocks(README):
        if block.kind == "commands":
            for line in joined(block.lines):
                for command in strip_comment(line).split("&&"):
                    if command.strip():
                        out.append((block.where(), command.strip()))
    return out


def sweep_points(overrides: list[str]) -> list[list[str]]:
    """Each value of a sweep's comma lists once (the n-th point takes each list's n-th value)."""
    choices = []
    for override in overrides:
        key, eq, value = override.partition("=")
        top_level = re.split(r",(?![^\[]*\])", value) if eq and not value.startswith("[") or "],[" in value else [value]
        choices.append([f"{key}={v}" for v in top_level] if eq and len(top_level) > 1 else [override])
    longest = max((len(c) for c in choices), default=1)
    return [[c[min(i, len(c) - 1)] for c in choices] for i in range(longest)]


@pytest.mark.parametrize("where,command", readme_commands(), ids=[f"{w}:{c[:60]}" for w, c in readme_commands()])
def test_every_readme_command_is_valid(where, command, tmp_path):
    env, words = split_env(command)
    if words[0] == "make":
        targets = re.findall(r"^([a-zA-Z_-]+):", (REPO / "Makefile").read_text(), re.M)
        assert words[1] in targets, f"{where}: make {words[1]}: no such Makefile target"
        return
    if words[:2] == ["pip", "install"]:
        # the names of [project.optional-dependencies] (tomllib is Python >= 3.11; memexp supports 3.10)
        section = (REPO / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1].split("\n[")[0]
        extras = re.findall(r"^([\w-]+) = \[", section, re.M)
        for named in re.findall(r"\[([\w,-]+)\]", " ".join(words)):
            assert set(named.split(",")) <= set(extras), f"{where}: unknown extra in {command}"
        return
    args = memexp_args(words)
    if args[0] == "run":
        overrides = [a for a in args[1:] if a not in ("-m", "--multirun")]
        for point in sweep_points(overrides):
            result = memexp(["run", "--cfg", "job", *point], tmp_path, env, timeout=120)
            assert result.returncode == 0, f"{where}: `{command}` ({point}) does not validate:\n{result.stderr[-2000:]}"
        return
    result = memexp([args[0], "--help"], tmp_path, env, timeout=120)
    assert result.returncode == 0, f"{where}: `python -m memexp {args[0]} --help` failed:\n{result.stderr[-2000:]}"
    for flag in (a.split("=")[0] for a in args[1:] if a.startswith("--")):
        assert flag in result.stdout, f"{where}: `{command}`: {args[0]} has no {flag}"


def test_the_readme_listing_names_what_a_run_folder_holds():
    listings = [b for b in blocks(README) if b.kind == "listing" and "records.jsonl" in "\n".join(b.lines)]
    assert listings, "the README's run-folder listing is gone"
    named = re.findall(r"\b([\w]+\.(?:yaml|jsonl|json))\b", "\n".join(listings[0].lines))
    source = inspect.getsource(records)
    for name in named:
        assert f'"{name}"' in source, f"the README lists {name}, which a run folder never holds"


def test_the_block_reader_sees_every_kind():
    kinds = {b.kind for b in blocks(README)}
    assert kinds == {"claim", "commands", "listing"}
    assert len(list(itertools.chain(all_claims()))) >= 3
