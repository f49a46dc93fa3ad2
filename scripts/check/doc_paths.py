"""Every file the documentation and the code's docstrings and comments name exists.

    python scripts/check/doc_paths.py            # one line per missing path: where it is named, and the path
    python scripts/check/doc_paths.py --all      # also list every path that was checked

What counts as a named path:
- in Markdown (README.md, docs/**/*.md): an inline `code span` that starts with one of the
  repository's top-level folders or files (memexp/, docs/, scripts/, tests/, kernels/, conf/,
  .ci/, Makefile, pyproject.toml, ...), or the target of a relative Markdown link;
- in Python (setup.py, memexp/, scripts/, tests/, kernels/, docs/hooks/): the same backticked spans in
  docstrings and comments, and bare mentions of memexp's own folders and of upper-case Markdown
  files at the top (a README or design note).
A span with a placeholder (`<run>`, `{a,b}`, `*`, `...`, `$VAR`, a space) names a pattern, not a
file, and is skipped; so is everything under outputs/ (written by runs, never committed).
`conf/...` names the config tree wherever it sits (conf/ at the top, or inside the package before the redesign).
tests/docs/test_docs_paths.py runs this check in the suite.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOP_LEVEL = ("memexp/", "docs/", "scripts/", "tests/", "kernels/", "conf/", ".ci/", "Makefile", "pyproject.toml",
             "setup.py", "mkdocs.yml", "README.md", "DESIGN.md")
PLACEHOLDER = re.compile(r"[<>{}*$\s]|\.\.\.|\[i\]")
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
# bare (not backticked) mentions in Python: memexp's own folders (scripts/ is left to backticks: the
# official repositories memexp follows have scripts/ folders of their own) and upper-case .md names
PY_PATH = re.compile(r"(?<![\w/.-])((?:memexp|docs|tests|kernels|conf|\.ci)/[\w./-]*[\w/]|[A-Z][A-Z_]+\.md)(?![\w<{*-])")
# pages mkdocs generates when the site builds (docs/hooks/)
GENERATED = {"docs/reference/configuration.md"}
# keys that look like paths (a W&B summary key)
NOT_PATHS = {"memexp/complete"}
SKIP_DIRS = {".git", "site", "build", "outputs", "__pycache__", ".wheelhouse"}


@dataclass(frozen=True)
class Named:
    source: str  # file:line that names the path
    path: str  # as written


def conf_root() -> Path:
    return REPO / "conf" if (REPO / "conf").is_dir() else REPO / "memexp" / "conf"


def ignored_prefixes() -> tuple[str, ...]:
    """Folders git ignores (a machine's own settings under the config tree's local/): named, never committed."""
    out = []
    for line in (REPO / ".gitignore").read_text().splitlines():
        line = line.strip().lstrip("/")
        if "/" in line and not line.startswith(("!", "#")):
            out.append(line.rsplit("/", 1)[0] + "/")
    return tuple(out)


def exists(path: str, relative_to: Path) -> bool:
    """`relative_to`: the folder a Markdown link is relative to; REPO for every other named path."""
    clean = path.rstrip("/").rstrip(".,;:")
    if clean == "conf" or clean.startswith("conf/"):
        clean = str(conf_root().relative_to(REPO) / clean[len("conf/"):])
    if clean in NOT_PATHS or (clean + "/").startswith(ignored_prefixes()):
        return True
    target = (relative_to / clean).resolve()
    if str(target.relative_to(REPO)) in GENERATED if target.is_relative_to(REPO) else False:
        return True
    return target.exists() or (REPO / clean).exists()


def is_repo_path(span: str) -> bool:
    span = span.strip()
    if PLACEHOLDER.search(span) or span.startswith("outputs/"):
        return False
    return span.startswith(TOP_LEVEL) and (span in TOP_LEVEL or "/" in span)


def shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def markdown_paths(page: Path) -> list[tuple[Named, Path]]:
    found = []
    in_fence = False
    for number, line in enumerate(page.read_text().split("\n"), 1):
        if line.startswith("```"):
            in_fence = not in_fence
        if in_fence or line.startswith("    "):
            continue  # code blocks hold commands and example output, not references
        where = f"{shown(page)}:{number}"
        for span in CODE_SPAN.findall(line):
            if is_repo_path(span):
                found.append((Named(where, span.strip()), REPO))
        for target in MD_LINK.findall(line):
            if not re.match(r"^[a-z]+:", target):
                found.append((Named(where, target), page.parent))
    return found


def python_text(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring and comment of a Python file."""
    out = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    except (tokenize.TokenError, SyntaxError):
        return out
    previous = None
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING and previous in (None, tokenize.INDENT, tokenize.NEWLINE, tokenize.DEDENT):
            for offset, text in enumerate(tok.string.split("\n")):
                out.append((tok.start[0] + offset, text))
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            previous = tok.type
    return out


def python_paths(path: Path) -> list[tuple[Named, Path]]:
    found = []
    for number, text in python_text(path):
        where = f"{shown(path)}:{number}"
        spans = set(CODE_SPAN.findall(text))
        for span in spans:
            if is_repo_path(span):
                found.append((Named(where, span.strip()), REPO))
        bare = CODE_SPAN.sub(" ", text)
        for candidate in PY_PATH.findall(bare):
            if is_repo_path(candidate) or "/" not in candidate:
                found.append((Named(where, candidate), REPO))
    return found


def files() -> tuple[list[Path], list[Path]]:
    def walk(root: Path, suffix: str) -> list[Path]:
        return sorted(p for p in root.rglob(f"*{suffix}") if not SKIP_DIRS & set(p.relative_to(REPO).parts))

    pages = [REPO / "README.md", *walk(REPO / "docs", ".md")]
    sources = [REPO / "setup.py"] + [p for d in ("memexp", "scripts", "tests", "kernels", "docs")
                                     if (REPO / d).is_dir() for p in walk(REPO / d, ".py")]
    return pages, sources


def missing_paths() -> tuple[list[Named], int]:
    """The named paths that do not exist, and how many named paths were checked."""
    pages, sources = files()
    named = [n for page in pages for n in markdown_paths(page)] + [n for src in sources for n in python_paths(src)]
    missing = [n for n, base in named if not exists(n.path, base)]
    return missing, len(named)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--all", action="store_true", help="also list every checked path")
    args = parser.parse_args()
    missing, checked = missing_paths()
    if args.all:
        pages, sources = files()
        for n, base in [n for p in pages for n in markdown_paths(p)] + [n for s in sources for n in python_paths(s)]:
            print(f"{'ok     ' if exists(n.path, base) else 'MISSING'} {n.source}: {n.path}")
    for n in missing:
        print(f"{n.source}: {n.path} does not exist")
    print(f"{len(missing)} of {checked} named paths missing", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
