#!/usr/bin/env bash
# The GPU check on an offline CUDA machine: install memexp from the wheelhouse copied with this
# checkout, then measure (scripts/check/gpu_check.py), all in one command.
#
#   make wheelhouse                                      # here, with internet: .wheelhouse/ (<= 20 MiB)
#   bash scripts/check/gpu_check.sh OUT_DIR [--budget 480] [--only WORD,...]   # there, offline
#
# Copy with it: the checkout's tracked files and .wheelhouse/ (together under 64 MiB). The install
# goes to a scratch folder on PYTHONPATH (`pip install --no-index --no-deps --target`), so the
# machine's own packages (torch, triton, transformers, ...) are used as they are and nothing is
# fetched. Without a CUDA device it exits 2 with one line, after the install, writing nothing.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: bash scripts/check/gpu_check.sh OUT_DIR [gpu_check.py options]}
shift
py=${PYTHON:-python3}
wheels=${MEMEXP_WHEELHOUSE:-$root/.wheelhouse}
scratch=$(mktemp -d)
if ! ls "$wheels"/*.whl >/dev/null 2>&1; then
  echo "gpu-check: no wheels in $wheels; run \`make wheelhouse\` where pip can download, and copy the folder here"
  exit 1
fi
if ! PIP_NO_INDEX=1 "$py" -m pip install --no-index --no-deps --no-compile --disable-pip-version-check \
    --target "$scratch/site" "$wheels"/*.whl >"$scratch/install.log" 2>&1; then
  echo "gpu-check: offline install from $wheels failed: $(tail -n 1 "$scratch/install.log")"
  exit 1
fi
export PYTHONPATH="$scratch/site${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" "$root/scripts/check/gpu_check.py" --out "$out" --install-log "$scratch/install.log" "$@"
