"""The kernels' layout and layer: one folder per op under kernels/, each with its entry point
(`__init__.py`) beside its PyTorch reference (`reference.py`), imported as memexp.kernels.<op>;
kernels/ itself no package (setup.py's docstring says why); and memexp.kernels, the layer just
above memexp.core, importing nothing of memexp but memexp.core and itself."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = ("memexp.core", "memexp.kernels")


def op_folders() -> list[Path]:
    return sorted(p for p in (ROOT / "kernels").iterdir() if p.is_dir() and p.name != "__pycache__")


def memexp_imports(path: Path) -> list[str]:
    """The memexp modules a file imports (absolute imports; `from memexp import x` as memexp.x)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [f"memexp.{a.name}" for a in node.names] if node.module == "memexp" else [node.module]
    return [n for n in names if n.split(".")[0] == "memexp"]


def outside_layer(path: Path) -> list[str]:
    return [n for n in memexp_imports(path) if not any(n == a or n.startswith(a + ".") for a in ALLOWED)]


def test_every_op_is_a_folder_with_its_reference_imported_under_the_package():
    assert not (ROOT / "kernels" / "__init__.py").exists()
    ops = [p.name for p in op_folders()]
    assert {"attention", "distinctiveness", "gated_delta_rule", "gdn2_rule", "routing", "short_conv", "ssd"} <= set(ops)
    for op in ops:
        assert (ROOT / "kernels" / op / "reference.py").is_file(), f"kernels/{op}/ has no reference.py"
        module = importlib.import_module(f"memexp.kernels.{op}")
        assert Path(module.__file__).resolve() == (ROOT / "kernels" / op / "__init__.py").resolve()
        importlib.import_module(f"memexp.kernels.{op}.reference")
    assert not (ROOT / "memexp" / "backbones" / "ops").exists()


def test_kernels_import_only_core_and_themselves():
    files = sorted((ROOT / "kernels").rglob("*.py")) + sorted((ROOT / "memexp" / "kernels").rglob("*.py"))
    assert len(files) > 15
    wrong = [f"{p.relative_to(ROOT)}: {name}" for p in files for name in outside_layer(p)]
    assert not wrong, "memexp.kernels imports above its layer: " + "; ".join(wrong)


def test_the_layer_check_sees_an_upward_import(tmp_path):
    planted = tmp_path / "op.py"
    planted.write_text("import torch\nfrom memexp.core.errors import X\nfrom memexp.kernels.dispatch import use_kernels\n"
                       "def f():\n    from memexp.backbones.norms import rms_norm\n    from memexp import methods\n")
    assert outside_layer(planted) == ["memexp.backbones.norms", "memexp.methods"]
