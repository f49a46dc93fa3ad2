# memexp — `make help` lists the targets.
PYTHON ?= python
# A machine without a GPU gets the CPU build of torch first; a GPU machine keeps (or gets) its CUDA build.
TORCH_CPU ?= torch==2.13.0

.PHONY: help install run test test-fast test-gpu bench wheelhouse gpu-check gpu-preflight lint docs docs-serve

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-10s %s\n", $$1, $$2}'

install: ## install memexp with its test tools (CPU torch where there is no GPU)
	@if ! command -v nvidia-smi >/dev/null 2>&1 && ! $(PYTHON) -c "import torch" >/dev/null 2>&1; then \
		$(PYTHON) -m pip install "$(TORCH_CPU)"; fi
	$(PYTHON) -m pip install -e ".[dev]"

run: ## the quick-start run on the embedded default (tiny_gdn_words, generated RULER)
	$(PYTHON) -m memexp run

# test workers (pytest-xdist): one more than 2 cores, as many tests wait on a subprocess or the SLURM scheduler;
# a file (tests/cluster, tests/run/tracking: a folder) per worker, files with slow tests first (tests/conftest.py)
TEST_WORKERS ?= 3
WORKERS = -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder
# the suite starts about 200 Python processes and 3 workers: with bytecode caching off (some images set
# PYTHONDONTWRITEBYTECODE) each compiles memexp's modules and rewrites the test modules anew (~30 CPU-s)
test test-fast: export PYTHONDONTWRITEBYTECODE =

# the suite builds the documentation site with --strict (tests/docs/test_docs_site.py), on a worker
# beside the other tests rather than alone before them
test: ## the whole CPU test suite, offline (what CI runs), on $(TEST_WORKERS) workers, the site's strict build included
	$(PYTHON) -m pytest -q -m "not gpu" $(WORKERS)

test-fast: ## the test suite without tests marked slow
	$(PYTHON) -m pytest -q -m "not gpu and not slow" $(WORKERS)

test-gpu: ## the CUDA tests: kernels against their references (a GPU and `pip install --no-build-isolation -e ".[cuda]"`)
	$(PYTHON) -m pytest -q -m gpu -rs

bench: ## measured figures: prefill, NoteBank vs Plain, routing, read-once (see docs/benchmarks.md)
	$(PYTHON) scripts/bench/all.py

wheelhouse: ## every wheel an offline GPU machine needs besides its torch image, in .wheelhouse/ (<= 20 MiB)
	$(PYTHON) scripts/check/wheelhouse.py

gpu-check: ## on a CUDA machine, offline: install from .wheelhouse/, then every kernel, model and protocol (8 min)
	bash scripts/check/gpu_check.sh outputs/gpu_check/$$(date +%Y-%m-%d_%H%M%S)

gpu-preflight: ## every dispatched Triton kernel compiled for sm_80 and sm_90 here, no GPU (GPU image's triton: --triton image)
	$(PYTHON) scripts/check/gpu_preflight.py $(PREFLIGHT_ARGS)

lint: ## ruff
	$(PYTHON) -m ruff check memexp kernels tests scripts

docs: ## the documentation site, into site/ (mkdocs.yml; fails on a broken link or an unexplained config field)
	$(PYTHON) -m mkdocs build --strict

docs-serve: ## serve the documentation site at http://127.0.0.1:8000, rebuilt on every edit
	$(PYTHON) -m mkdocs serve
