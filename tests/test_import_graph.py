"""No import cycle anywhere in memexp: the import graph read from the source (ast), with
module-level and function-level imports alike, since an import deferred into a function that
closes a cycle is still a cycle between the two modules' designs."""

import ast
from pathlib import Path

import memexp

PACKAGE = Path(memexp.__file__).parent


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package directory `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
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


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports. A name resolves to its longest prefix that
    is a module; importing one's own enclosing package is not an edge (Python runs it first
    anyway, and a package naming its submodules is how packages work)."""
    files = module_files(root)
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


def test_memexp_has_no_import_cycle():
    graph = import_graph(PACKAGE)
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
