"""The kernels' layout: one folder per op under kernels/, each with its entry point
(`__init__.py`) beside its PyTorch reference (`reference.py`), imported as memexp.kernels.<op>;
kernels/ itself no package (setup.py's docstring says why); no second home for the backbone ops.
(That memexp.kernels imports only memexp.core is tests/test_import_graph.py's layer check.)"""

from __future__ import annotations

import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_op_is_a_folder_with_its_reference_imported_under_the_package():
    assert not (ROOT / "kernels" / "__init__.py").exists()
    ops = sorted(p.name for p in (ROOT / "kernels").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert {"attention", "distinctiveness", "gated_delta_rule", "gdn2_rule", "routing", "short_conv", "ssd"} <= set(ops)
    for op in ops:
        assert (ROOT / "kernels" / op / "reference.py").is_file(), f"kernels/{op}/ has no reference.py"
        module = importlib.import_module(f"memexp.kernels.{op}")
        assert Path(module.__file__).resolve() == (ROOT / "kernels" / op / "__init__.py").resolve()
        importlib.import_module(f"memexp.kernels.{op}.reference")
    assert not (ROOT / "memexp" / "backbones" / "ops").exists()
