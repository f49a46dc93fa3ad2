"""memexp's own Triton kernels, each beside its PyTorch reference.

Their sources live in the top-level kernels/ folder (docs/architecture.md); setup.py maps its packages in
here (kernels/routing -> memexp.kernels.routing). That folder has no __init__.py on purpose: run
from the repository root (`python -m memexp`, `python -m pytest`), the root is on sys.path, and a
regular package kernels/ there would be the top-level `kernels` every import finds first, in
place of the PyPI package transformers imports (transformers >= 5 depends on it). Without the
file the folder is at most a namespace portion, which a regular package anywhere on sys.path wins
over."""
