"""The site's mkdocs hooks (docs/hooks/*.py), imported by file path as mkdocs itself loads them."""

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_hook(name: str):
    """docs/hooks/<name>.py as a module (registered in sys.modules: its dataclasses need it)."""
    module_name = f"memexp_docs_hook_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, REPO / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
