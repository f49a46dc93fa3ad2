"""memexp's layers (docs/architecture.md) hold, and no import cycle exists anywhere: the import graph
read from the source (ast), with module-level and function-level imports alike, since an import
deferred into a function that closes a cycle or points up is still in the two modules' designs.

A package imports only packages of lower layers (never a sibling of its own layer, never upward);
lazy `"module:attr"` strings in the registries are not imports, which is how a layer names what a
higher one implements."""

import ast
import shutil
from pathlib import Path

import memexp

PACKAGE = Path(memexp.__file__).parent
KERNELS = PACKAGE.parent / "kernels"  # installed as memexp.kernels.<op> (setup.py)

# docs/architecture.md's diagram, bottom to top: the package (memexp.<name>) -> its layer
LAYERS = {
    "core": 0,
    "kernels": 1,
    "backbones": 2, "adapters": 2,
    "costs": 3, "convert": 3,
    "methods": 4, "benchmarks": 4,
    "run": 5,
    "training": 6, "results": 6, "cluster": 6, "lmeval": 6,
    "report": 7, "embedded": 7,
    "cli": 8,
    "__main__": 9,
}


def module_files(root: Path, prefix: tuple[str, ...] = ()) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package directory `root` (named
    `prefix` + its path, for a folder installed under another name)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = prefix + path.relative_to(root.parent if not prefix else root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name `module` imports, wherever the statement sits; `from a import b`
    yields both a and a.b (b may be a submodule), relative imports are made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path, extra: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """module -> the package's modules it imports (`extra`: more module files, by name). A name
    resolves to its longest prefix that is a module; importing one's own enclosing package is not
    an edge (Python runs it first anyway, and a package naming its submodules is how packages work)."""
    files = {**module_files(root), **(extra or {})}
    graph = {}
    for module, path in files.items():
        edges = set()
        for name in imported_names(module, path):
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                edges.add(name)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Kosaraju: finish order by
    depth-first search, then components by search on the reversed graph in reverse finish order)."""
    finished, seen = [], set()
    for start in graph:
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(sorted(graph[start])))]
        while stack:
            node, children = stack[-1]
            child = next((c for c in children if c not in seen), None)
            if child is None:
                finished.append(node)
                stack.pop()
            else:
                seen.add(child)
                stack.append((child, iter(sorted(graph[child]))))
    reverse = {m: set() for m in graph}
    for m, targets in graph.items():
        for t in targets:
            reverse[t].add(m)
    components, assigned = [], set()
    for root in reversed(finished):
        if root in assigned:
            continue
        component, todo = [], [root]
        assigned.add(root)
        while todo:
            node = todo.pop()
            component.append(node)
            for prev in reverse[node] - assigned:
                assigned.add(prev)
                todo.append(prev)
        if len(component) > 1:
            components.append(sorted(component))
    return components


def memexp_graph(package: Path = PACKAGE, kernels: Path = KERNELS) -> dict[str, set[str]]:
    return import_graph(package, module_files(kernels, ("memexp", "kernels")) if kernels.is_dir() else None)


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a package to one of its own layer or above, as 'a -> b (layers i -> j)'."""
    out = []
    for module, targets in sorted(graph.items()):
        here = layer_of(module)
        for target in sorted(targets):
            there = layer_of(target)
            if module.split(".")[:2] == target.split(".")[:2] or there is None:
                continue
            if here is None or there >= here:
                out.append(f"{module} -> {target} (layers {here} -> {there})")
    return out


def test_every_package_has_a_layer_and_the_package_root_holds_no_module():
    """A new top-level package must be placed in the diagram; memexp/ itself holds only __init__
    and __main__ (everything else sits in the folder of its concept)."""
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert packages - {"conf", "assets"} <= set(LAYERS), sorted(packages - set(LAYERS))
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]


def test_every_import_points_down_the_layers():
    graph = memexp_graph()
    assert any(m.startswith("memexp.kernels.routing") for m in graph)  # kernels/ was read as memexp.kernels
    found = wrong_way(graph)
    assert not found, "imports against the layers of docs/architecture.md:\n" + "\n".join(found)


def test_a_planted_wrong_way_import_fails_the_layer_check(tmp_path):
    """The check sees what it claims to: a copy of memexp where a method imports the runner (layer 4
    -> 5) and one where core imports a backbone, deferred into a function."""
    for victim, line in (("methods/base.py", "from memexp.run.runner import run\n"),
                         ("core/paths.py", "def f():\n    import memexp.backbones.base\n")):
        copy = tmp_path / victim.replace("/", "_") / "memexp"
        shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "assets", "conf"))
        assert not wrong_way(memexp_graph(copy, KERNELS))
        (copy / victim).write_text((copy / victim).read_text() + line)
        found = wrong_way(memexp_graph(copy, KERNELS))
        assert len(found) == 1 and found[0].startswith("memexp." + victim[:-3].replace("/", ".")), found


def test_memexp_has_no_import_cycle():
    graph = memexp_graph()
    assert len(graph) > 50 and "memexp.backbones.gdn.costs" in graph  # the whole package was read
    assert graph["memexp.backbones.gdn.costs"] >= {"memexp.backbones.gdn.model", "memexp.backbones.shapes"}
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_detector_finds_deferred_and_relative_cycles(tmp_path):
    """A cycle closed by an import inside a function, one through a relative import and a
    `from package import submodule`, and no false cycle from a submodule importing its package."""
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from toy.a import A\n",
        "a.py": "A = 1\ndef f():\n    from toy import b\n",
        "b.py": "import toy.a\n",
        "sub/__init__.py": "",
        "sub/c.py": "from . import d\nimport toy\n",
        "sub/d.py": "from .c import x\n",
        "e.py": "import os\nfrom toy.sub import c\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = import_graph(pkg)
    assert graph["toy.a"] == {"toy.b"} and graph["toy.sub.c"] == {"toy.sub.d"}
    assert graph["toy.e"] == {"toy.sub", "toy.sub.c"}
    assert sorted(cycles(graph)) == [["toy.a", "toy.b"], ["toy.sub.c", "toy.sub.d"]]


def config_classes() -> dict[str, str]:
    """Class name -> the method or benchmark package that defines it, for every *Config class there."""
    out = {}
    for kind in ("methods", "benchmarks"):
        for path in (PACKAGE / kind).rglob("*.py"):
            package = ".".join(("memexp",) + path.relative_to(PACKAGE).parts[:2]).removesuffix(".py")
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef) and node.name.endswith("Config"):
                    out[node.name] = package
    return out


def foreign_config_branches(root: Path = PACKAGE) -> list[str]:
    """`isinstance(x, SomeMethodConfig)` outside the package that defines SomeMethodConfig: code that
    branches on another package's config instead of asking the registry's metadata."""
    owners, found = config_classes(), []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(("memexp",) + path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("isinstance", "issubclass") \
                    and len(node.args) == 2:
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                for name in sorted(names & set(owners)):
                    if not module.startswith(owners[name] + ".") and module != owners[name]:
                        found.append(f"{module}:{node.lineno} isinstance(..., {name})")
    return found


def test_no_code_branches_on_another_packages_config(tmp_path):
    assert {"NoteBankConfig", "TitanConfig", "RulerConfig"} <= set(config_classes())
    assert not foreign_config_branches(), foreign_config_branches()
    copy = tmp_path / "memexp"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "assets", "conf"))
    (copy / "run" / "checks.py").write_text((copy / "run" / "checks.py").read_text()
                                            + "def f(m):\n    return isinstance(m, TitanConfig)\n")
    assert [b.split(":")[0] for b in foreign_config_branches(copy)] == ["memexp.run.checks"]
