"""The "Extending memexp" recipe holds, counted in files: inside memexp, an architecture, a method
and a benchmark are each one new folder with exactly the files below, and nothing else is edited
(no list of builtins, no cost branch, no CLI table): the registries discover them. The test writes
the three folders into a copy of the package and runs them by name in a fresh interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import memexp

PACKAGE = Path(memexp.__file__).resolve().parent

# the recipe (docs: "Extending memexp"): the files a new entry of each kind is made of
RECIPE = {
    "backbones/toy_arch": ("__init__.py", "model.py", "costs.py"),
    "methods/toy_echo": ("__init__.py", "config.py", "method.py"),
    "benchmarks/toy_count": ("__init__.py", "config.py", "benchmark.py"),
}

FILES = {
    "backbones/toy_arch/__init__.py": '''"""A toy architecture: memexp's GDN under its own name."""
from memexp.core.registry import ARCHS

ARCHS.register("toy_arch", "memexp.backbones.toy_arch.model:build", schema="memexp.backbones.toy_arch.model:ToyConfig",
               recurrent_channels=True, costs="memexp.backbones.toy_arch.costs:cost_shapes")
''',
    "backbones/toy_arch/model.py": '''from memexp.backbones.gdn.model import GDNConfig as ToyConfig
from memexp.backbones.gdn.model import build as gdn_build


def build(cfg):
    backbone = gdn_build(cfg)
    backbone.built_as = "toy_arch"
    return backbone


__all__ = ["ToyConfig", "build"]
''',
    "backbones/toy_arch/costs.py": '''from memexp.backbones.gdn.costs import cost_shapes

__all__ = ["cost_shapes"]
''',
    "methods/toy_echo/__init__.py": '"""A toy method: reads the context `reads` times."""\n',
    "methods/toy_echo/config.py": '''from dataclasses import dataclass

from memexp.core.registry import METHODS
from memexp.core.schema import MethodConfig


@dataclass
class EchoConfig(MethodConfig):
    name: str = "toy_echo"
    reads: int = 1  # how many times the context is read


METHODS.register(EchoConfig.name, "memexp.methods.toy_echo.method:Echo", schema=EchoConfig, adds_flops=False)
''',
    "methods/toy_echo/method.py": '''from memexp.methods.base import Answer, Memory, Method


class Echo(Method):
    name = "toy_echo"

    def __init__(self, cfg):
        self.cfg = cfg

    def read(self, backbone, context_ids):
        state = backbone.init_state()
        for _ in range(self.cfg.reads):
            backbone.forward(state, context_ids)
        return Memory(state=state, context_len=len(context_ids), stats={"reads": self.cfg.reads,
                      "arch": getattr(backbone, "built_as", None)}, extra=None)

    def answer(self, backbone, memory, question_ids, question, stop=None):
        ids = backbone.generate(memory.state.clone(), question_ids, question.max_new_tokens, stop)
        return Answer(ids=ids, stats=dict(memory.stats), tokens={"question": len(question_ids)})
''',
    "benchmarks/toy_count/__init__.py": '"""A toy benchmark: `examples` tiny contexts."""\n',
    "benchmarks/toy_count/config.py": '''from dataclasses import dataclass

from memexp.core.registry import BENCHES
from memexp.core.schema import BenchConfig


@dataclass
class CountConfig(BenchConfig):
    name: str = "toy_count"
    examples: int = 2  # how many contexts


BENCHES.register(CountConfig.name, "memexp.benchmarks.toy_count.benchmark:Count", schema=CountConfig)
''',
    "benchmarks/toy_count/benchmark.py": '''from memexp.benchmarks.base import Benchmark
from memexp.core.types import Example, Question


class Count(Benchmark):
    name = "toy_count"

    def __init__(self, cfg):
        self.cfg = cfg

    def examples(self, tokenizer):
        for i in range(self.cfg.examples):
            q = Question(id="q", prompt=" value?", references=[str(i)], metric="toy", max_new_tokens=2)
            yield Example(id=f"ex{i}", task="toy_task", length=16, context=f"value {i}.", questions=[q])

    def score(self, prediction, question):
        return 100.0 if isinstance(prediction, str) else 0.0
''',
}


def test_the_recipe_lists_what_the_test_writes():
    assert {path for path in FILES} == {f"{folder}/{name}" for folder, names in RECIPE.items() for name in names}


def test_an_architecture_a_method_and_a_benchmark_are_one_folder_each(tmp_path):
    copy = tmp_path / "memexp"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path, text in FILES.items():
        target = copy / path
        target.parent.mkdir(exist_ok=True)
        target.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "WANDB_MODE": "disabled"}

    def memexp_cli(*args: str) -> subprocess.CompletedProcess:  # the copy first on the path, not this checkout
        return subprocess.run([sys.executable, "-m", "memexp", *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    listing = memexp_cli("ls")
    assert listing.returncode == 0, listing.stderr
    lines = dict(line.split(": ", 1) for line in listing.stdout.splitlines() if ": " in line)
    assert "toy_echo" in lines["method"].split(", ") and "toy_count" in lines["bench"].split(", ")
    out = memexp_cli("run", "backbone=tiny_gdn_random", "backbone.arch=toy_arch", "method=toy_echo",
                     "method.reads=2", "bench=toy_count", "bench.examples=3", "logger=none", "progress=false",
                     f"output_dir={tmp_path / 'runs'}")
    assert out.returncode == 0, out.stderr
    (found,) = (tmp_path / "runs").rglob("records.jsonl")
    records = [json.loads(line) for line in found.read_text().splitlines()]
    assert [r["example_id"] for r in records] == ["ex0", "ex1", "ex2"]
    assert all(r["method_stats"] == {"reads": 2, "arch": "toy_arch"} for r in records)  # the copy's toys ran
    # the architecture's cost model was found beside it: Plain figures, nothing added by the method
    assert all(r["costs"]["plain_flops"] > 0 and r["costs"]["added_flops"] == 0 for r in records)
