"""kernels/ lives at the top level (DESIGN.md) but is imported as `memexp.kernels`: a
top-level package named `kernels` would shadow the PyPI package transformers probes for.
Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

packages = find_packages(include=["memexp", "memexp.*"])
kernel_packages = ["memexp.kernels" + p[len("kernels"):] for p in find_packages(include=["kernels", "kernels.*"])]
package_dir = {"memexp.kernels" + p[len("kernels"):]: p.replace(".", "/") for p in find_packages(include=["kernels", "kernels.*"])}

setup(packages=packages + kernel_packages, package_dir=package_dir)
