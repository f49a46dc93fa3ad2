"""Scripts are files, not a package: tests load one by path."""

import importlib.util
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load_script(name: str):
    """The module of scripts/<kind>/<name>.py (its name is unique across the kinds' folders)."""
    (path,) = SCRIPTS.glob(f"*/{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
