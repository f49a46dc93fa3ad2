"""Plain greedy accuracy of a backbone on RULER's own evaluation examples (seed 42 by default).

The recipe reports it as its final metric. The examples and the score are `bench=ruler`'s
(memexp.benchmarks.ruler), so they are scored by the runner's own per-example loop, never text the recipe trained on.
"""

from __future__ import annotations

import tempfile

from memexp.backbones.base import Backbone
from memexp.benchmarks.ruler.benchmark import Ruler
from memexp.benchmarks.ruler.config import RulerConfig
from memexp.methods.plain.method import Plain
from memexp.run.runner import run_example


def plain_accuracy(backbone: Backbone, task: str, length: int, num_samples: int, seed: int = 42,
                   essay_standin: bool = False) -> float:
    """Mean RULER score (percent) of Plain on `num_samples` examples of `task` at `length` tokens
    (`essay_standin`: essay tasks on memexp's stand-in prose, bench.essay_standin)."""
    with tempfile.TemporaryDirectory() as cache_dir:
        bench = Ruler(RulerConfig(tasks=[task], lengths=[length], num_samples=num_samples, seed=seed,
                                  cache_dir=cache_dir, essay_standin=essay_standin))
        examples = bench.task_examples(task, length, backbone.tokenizer)
    method = Plain()
    method.prepare(backbone)
    scores = [rec.score for ex in examples for rec in run_example(ex, backbone, method, bench)]
    return sum(scores) / max(len(scores), 1)
