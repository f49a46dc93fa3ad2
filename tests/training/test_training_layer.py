"""memexp.training (layer 5) imports neither the app (memexp.cli), the runner, nor the embedded
models' research above it; memexp.embedded imports no CLI (docs/architecture.md's layers)."""

from tests.test_import_graph import PACKAGE, import_graph

ABOVE_TRAINING = ("memexp.cli", "memexp.run.runner", "memexp.embedded", "memexp.report")


def upward(graph: dict[str, set[str]], package: str, forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    return sorted((m, t) for m, targets in graph.items() if m == package or m.startswith(package + ".")
                  for t in targets if any(t == f or t.startswith(f + ".") for f in forbidden))


def test_training_imports_nothing_above_it():
    assert upward(import_graph(PACKAGE), "memexp.training", ABOVE_TRAINING) == []


def test_the_embedded_research_imports_no_cli():
    assert upward(import_graph(PACKAGE), "memexp.embedded", ("memexp.cli",)) == []


def test_the_check_sees_an_upward_import(tmp_path):
    """The same check on a copy whose training module imports the app: it must be found."""
    import shutil

    copy = tmp_path / "memexp"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("assets", "__pycache__"))
    loop = copy / "training" / "loop.py"
    loop.write_text(loop.read_text() + "\n\ndef _wrong():\n    from memexp.cli.app import load_config\n")
    assert upward(import_graph(copy), "memexp.training", ABOVE_TRAINING) == [("memexp.training.loop",
                                                                             "memexp.cli.app")]
