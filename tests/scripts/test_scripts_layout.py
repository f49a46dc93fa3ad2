"""scripts/ holds four kinds of script, each in its folder, and none edits sys.path: a script imports
memexp as installed, and what two scripts share lives in the package (a sys.path chain between
scripts breaks as soon as one moves)."""

import ast
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
KINDS = {"bench", "check", "convert", "probe"}


def sys_path_edits(path: Path) -> list[int]:
    """Lines of `path` that change sys.path (insert, append, extend, assignment)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        target = node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t for t in targets if isinstance(t, ast.Attribute)), None)
        if isinstance(target, ast.Attribute) and target.attr == "path" and getattr(target.value, "id", "") == "sys":
            out.append(node.lineno)
    return sorted(out)


def test_scripts_sit_in_their_kinds_folders():
    assert {p.name for p in SCRIPTS.iterdir()} == KINDS
    assert all(list(folder.glob("*.py")) for folder in SCRIPTS.iterdir())


def test_no_script_edits_sys_path(tmp_path):
    found = {str(p.relative_to(SCRIPTS)): lines for p in sorted(SCRIPTS.rglob("*.py")) if (lines := sys_path_edits(p))}
    assert not found, found
    planted = tmp_path / "x.py"
    planted.write_text("import sys\nsys.path.insert(0, '.')\nsys.path += ['a']\nprint(sys.path)\n")
    assert sys_path_edits(planted) == [2, 3]
