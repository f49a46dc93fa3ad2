"""kernels/ lives at the top level (docs/architecture.md) but is imported as `memexp.kernels`: its packages
(kernels/routing, kernels/distinctiveness) are mapped under memexp/kernels/__init__.py. kernels/
itself has no __init__.py, so that it never shadows the PyPI package `kernels`, which transformers
imports, when the repository root is on sys.path. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

packages = find_packages(include=["memexp", "memexp.*"])
kernel_dirs = find_packages(where="kernels")  # routing, distinctiveness, ... (kernels/ is not a package)
package_dir = {f"memexp.kernels.{p}": "kernels/" + p.replace(".", "/") for p in kernel_dirs}

setup(packages=packages + sorted(package_dir), package_dir=package_dir)
