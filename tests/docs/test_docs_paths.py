"""No page, docstring or comment names a file of the repository that does not exist
(scripts/check/doc_paths.py; run it alone to list what it finds)."""

import importlib.util
import sys

from docs_hooks import REPO


def load_checker():
    name = "memexp_doc_paths_check"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "check" / "doc_paths.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


checker = load_checker()


def test_every_named_path_exists():
    missing, checked = checker.missing_paths()
    assert checked > 200  # the README, every page and every docstring were read
    assert not missing, "named paths that do not exist (python scripts/check/doc_paths.py):\n" + "\n".join(
        f"{n.source}: {n.path}" for n in missing)


def test_a_missing_path_is_reported(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See `docs/no_such_page.md`, `memexp/core/registry.py`, [results](no_such.md), "
                    "`outputs/runs/<bench>` and `conf/backbone/gdn.yaml`.\n\n    `docs/in_a_code_block.md`\n")
    named = {n.path: checker.exists(n.path, base) for n, base in checker.markdown_paths(page)}
    assert named == {"docs/no_such_page.md": False, "memexp/core/registry.py": True, "no_such.md": False,
                     "conf/backbone/gdn.yaml": True}
    source = tmp_path / "module.py"
    source.write_text('"""Follows DESIGN.md and `scripts/no_such_script.py`; see docs/benchmarks.md."""\n'
                      "x = 1  # the layout: memexp/no_such_module.py\n")
    named = {n.path: checker.exists(n.path, base) for n, base in checker.python_paths(source)}
    assert named == {"DESIGN.md": False, "scripts/no_such_script.py": False, "docs/benchmarks.md": True,
                     "memexp/no_such_module.py": False}
