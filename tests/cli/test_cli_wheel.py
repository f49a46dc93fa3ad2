"""The wheel carries memexp's configs: installed (not editable) into a fresh environment, `memexp ls`
and the quick start work from any folder."""

import os
import subprocess
import sys
from pathlib import Path

import memexp

SOURCE = Path(memexp.__file__).resolve().parents[1]


def sh(args, cwd, env=None, timeout=300):
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(map(str, args))}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def see_this_environment(python):
    """The packages of the environment running the tests (torch, hydra, ...), without downloading
    them again, for the new venv's `python`. Not `venv --system-site-packages`: when the tests run
    in a virtualenv (the usual install), that shows the base interpreter's packages, not the
    virtualenv's. The wheel's memexp is still the one imported (checked by the caller), ahead of
    any editable install found here."""
    purelib = sh([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], Path.cwd()).strip()
    ours = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in ours)
    (Path(purelib) / "_memexp_test_environment.pth").write_text(lines)


def test_wheel_runs_the_quick_start_from_any_folder(tmp_path):
    wheels = tmp_path / "wheels"
    sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", SOURCE, "-w", wheels], SOURCE)
    (wheel,) = wheels.glob("memexp-*.whl")
    venv = tmp_path / "venv"
    python, bin_memexp = venv / "bin" / "python", venv / "bin" / "memexp"
    sh([sys.executable, "-m", "venv", venv], tmp_path)
    see_this_environment(python)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MEMEXP_ROOT")}
    # forced: the environment seen may hold memexp at the same version (an editable install)
    sh([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall", wheel], tmp_path, env)
    work = tmp_path / "somewhere"
    work.mkdir()
    where = sh([python, "-c", "import memexp; print(memexp.__file__)"], work, env)
    assert Path(where.strip()).is_relative_to(venv), where
    kernels = sh([python, "-c", "import memexp.kernels.routing as r, memexp.kernels.distinctiveness; print(r.__file__)"],
                 work, env)
    assert Path(kernels.strip()).is_relative_to(venv), kernels
    listing = sh([bin_memexp, "ls"], work, env)
    assert "backbone: " in listing and "tiny_gdn" in listing and "hydra/launcher: joblib, local, processes, slurm, slurm_local" in listing
    # the converter mamba2_8b needs ships in the wheel (not only in the checkout's scripts/)
    usage = sh([bin_memexp, "convert", "mamba2-megatron", "--help"], work, env)
    assert "usage: memexp convert mamba2-megatron" in usage and "--tokenizer" in usage
    sh([bin_memexp, "run", "max_examples=1", "progress=false"], work, env)
    (summary,) = work.glob("outputs/runs/ruler/tiny_gdn_words/notebank/*/summary.json")
    assert '"num_examples": 1' in summary.read_text()


def test_from_the_repository_root_the_top_level_kernels_is_never_memexps_folder():
    """`python -m memexp` and `python -m pytest` run from the repository root put the root on sys.path.
    Its kernels/ folder (memexp's Triton kernels, imported as memexp.kernels) must not then be the
    top-level package `kernels`, the PyPI package transformers imports: without an __init__.py it is
    a namespace portion at most, which a regular package installed anywhere wins over."""
    probe = ("import importlib.util as u, memexp.kernels.routing as r; s = u.find_spec('kernels'); "
             "print(s.origin if s else None); print(r.__name__)")
    origin, routing = sh([sys.executable, "-c", probe], SOURCE).split()
    assert origin == "None" or not Path(origin).resolve().is_relative_to(SOURCE / "kernels"), origin
    assert routing == "memexp.kernels.routing"
