"""Every GPU kernel memexp writes or dispatches to, one op per subpackage, each beside its
PyTorch reference (`memexp.kernels.<op>`: the entry point in `__init__.py`, the reference in
`reference.py`, memexp's own Triton kernel where it has one).

The ops' sources live in the top-level kernels/ folder (docs/architecture.md); setup.py maps its packages in
here (kernels/routing -> memexp.kernels.routing). This anchor package holds what the ops share:
`dispatch` (the kernels=auto|triton|torch switch and its bookkeeping), `fla` (the one call into
FLA's delta-rule kernels) and `recurrence` (helpers of the recurrences' reference forms). It may
import only memexp.core.

kernels/ has no __init__.py on purpose: run from the repository root (`python -m memexp`,
`python -m pytest`), the root is on sys.path, and a regular package kernels/ there would be the
top-level `kernels` every import finds first, in place of the PyPI package transformers imports
(transformers >= 5 depends on it). Without the file the folder is at most a namespace portion,
which a regular package anywhere on sys.path wins over."""

