"""Two top-level folders are installed inside the package (docs/architecture.md's layout, one tree a
reader sees): conf/ as memexp.conf (the Hydra configs, found by module) and kernels/<op>/ as
memexp.kernels.<op>. kernels/ itself has no __init__.py, so that it never shadows the PyPI package
`kernels`, which transformers imports, when the repository root is on sys.path. Everything else is
in pyproject.toml."""

from setuptools import find_namespace_packages, find_packages, setup

packages = find_packages(include=["memexp", "memexp.*"])
# Hydra loads sweepers only from its plugin namespace; memexp's (memexp.cli.sweeper) is named there
packages += find_namespace_packages(include=["hydra_plugins.*"])
kernel_dirs = find_packages(where="kernels")  # routing, distinctiveness, ... (kernels/ is not a package)
package_dir = {f"memexp.kernels.{p}": "kernels/" + p.replace(".", "/") for p in kernel_dirs}
package_dir["memexp.conf"] = "conf"

setup(packages=packages + sorted(package_dir), package_dir=package_dir)
