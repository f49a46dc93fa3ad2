"""The code blocks of a Markdown page: what tests/docs checks in them.

A block is an indented (4 spaces) or fenced block. Three kinds matter:
- a *claim*: lines `$ command` followed by the output the page says the command prints;
- *commands*: every line a shell command (`python -m memexp ...`, `make ...`, `pip install ...`),
  each with an optional trailing `# comment`;
- anything else (a folder listing, YAML, Python): a *listing*.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

COMMAND_START = ("python ", "make ", "pip ", "eval ", "OMP_", "MEMEXP_", "PYTHONPATH=", "torchrun ", "bash ")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the block's first line in the page
    lines: list[str]

    @property
    def kind(self) -> str:
        if any(line.startswith("$ ") for line in self.lines):
            return "claim"
        if all(strip_comment(c).startswith(COMMAND_START) for c in joined(self.lines) if c.strip()):
            return "commands"
        return "listing"

    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


@dataclass
class Claim:
    """One `$ command` and the output lines the page shows for it ('...' lines elide output); the
    lines of a claim block before its first `$` are commands shown without output."""

    command: str
    output: list[str] = field(default_factory=list)


def blocks(page: Path) -> list[Block]:
    text = page.read_text().split("\n")
    found, i = [], 0
    while i < len(text):
        line = text[i]
        if line.startswith("```"):
            start, i = i, i + 1
            body = []
            while i < len(text) and not text[i].startswith("```"):
                body.append(text[i])
                i += 1
            if body:
                found.append(Block(page, start + 2, body))
            i += 1
            continue
        previous_blank = i == 0 or not text[i - 1].strip()
        if line.startswith("    ") and previous_blank:
            start, body = i, []
            while i < len(text) and (text[i].startswith("    ") or not text[i].strip()):
                body.append(text[i][4:])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            found.append(Block(page, start + 1, body))
            continue
        i += 1
    return found


def joined(lines: list[str]) -> list[str]:
    """Lines with backslash continuations joined."""
    out, pending = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        out.append(pending + line.strip() if pending else line)
        pending = ""
    return out


def strip_comment(line: str) -> str:
    """The command without its trailing `# comment` (a # inside quotes stays)."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "#" and quote is None and (i == 0 or line[i - 1] == " "):
            return line[:i].rstrip()
        continue
    return line.rstrip()


def claims(block: Block) -> list[Claim]:
    out: list[Claim] = []
    for line in joined(block.lines):
        if line.startswith("$ "):
            out.append(Claim(line[2:].strip()))
        elif out:
            out[-1].output.append(line.rstrip())
    return out


def split_env(command: str) -> tuple[dict[str, str], list[str]]:
    """`A=1 B=2 python -m ...` as ({A: 1, B: 2}, [python, -m, ...])."""
    words = shlex.split(command)
    env = {}
    while words and ENV_ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


def shown_in_order(claimed: list[str], actual: list[str]) -> str | None:
    """None when every claimed line (but '...') appears in the actual output, in order; else the
    first claimed line that does not."""
    position = 0
    for line in claimed:
        if line.strip() in ("", "..."):
            continue
        while position < len(actual) and actual[position].rstrip() != line.rstrip():
            position += 1
        if position == len(actual):
            return line
        position += 1
    return None
