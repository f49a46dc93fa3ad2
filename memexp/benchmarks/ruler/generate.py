"""From a generator to the examples of one (task, length): size the haystack once, then
build each example, dropping `incremental` units from any that overflows (RULER's loop)."""

from __future__ import annotations

from memexp.backbones.base import Tokenizer
from memexp.benchmarks.base import Example, Question
from memexp.benchmarks.ruler.length import TokenBudget, TooShort, largest_fitting
from memexp.benchmarks.ruler.sample import Generator, Sample, sample_rng
from memexp.config import ConfigError


def _too_short(task: str, length: int, size: int, tokens: int, max_new_tokens: int) -> ConfigError:
    return ConfigError(
        f"bench.lengths={length} is too short for {task}: its smallest input ({size} haystack units) "
        f"takes {tokens} tokens including max_new_tokens={max_new_tokens}"
    )


def generate_examples(
    task: str,
    length: int,
    generator: Generator,
    tokenizer: Tokenizer,
    *,
    seed: int,
    num_samples: int,
    max_new_tokens: int,
    metric: str,
) -> list[Example]:
    budget = TokenBudget(tokenizer, length, max_new_tokens)
    probed: dict[int, tuple[Sample, int]] = {}

    def build(index: int, size: int) -> tuple[Sample, int]:
        if index == 0 and size in probed:
            return probed[size]
        sample = generator.build(index, size, sample_rng(task, seed, index))
        return sample, budget.total(sample)

    def probe(size: int) -> int:
        probed[size] = build(0, size)
        return probed[size][1]

    try:
        size = largest_fitting(
            probe, length, start=generator.incremental, low=generator.min_size, high=generator.max_size
        )
    except TooShort as e:
        raise _too_short(task, length, e.size, e.tokens, max_new_tokens) from None
    if size == generator.max_size:
        raise generator.exhausted(size)

    examples = []
    for index in range(num_samples):
        used = size
        sample, total = build(index, used)
        while total > length:
            if used == generator.min_size:
                raise _too_short(task, length, used, total, max_new_tokens)
            used = max(generator.min_size, used - generator.incremental)
            sample, total = build(index, used)
        examples.append(_example(task, length, index, sample, total, max_new_tokens, metric))
        if index == 0:
            probed.clear()
    return examples


def _example(
    task: str, length: int, index: int, sample: Sample, total: int, max_new_tokens: int, metric: str
) -> Example:
    example_id = f"{task}/{length}/{index}"
    question = Question(
        id=f"{example_id}/0",
        prompt=sample.prompt,
        references=list(sample.answers),
        metric=metric,
        max_new_tokens=max_new_tokens,
    )
    meta = {**sample.meta, "tokens": total}
    return Example(id=example_id, task=task, length=length, context=sample.context, questions=[question], meta=meta)
