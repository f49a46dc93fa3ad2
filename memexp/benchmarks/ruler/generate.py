"""From a generator to the examples of one (task, length): each example's haystack is the
largest that fits the target length with that example's own draws.

NVIDIA/RULER (scripts/data/synthetic/niah.py generate_samples, and its qa / vt / cwe / fwe
siblings) bisects the haystack size once, on draws from the run's shared random stream,
then builds every sample at that size and drops `incremental` units (500 essay words, 25
sentences) from a sample that overflows. A sample whose needles and keys take a few more
tokens than the searched draw's then loses a whole increment: at 16K with a BPE tokenizer,
3 of 20 niah_multivalue and 4 of 20 niah_multiquery inputs in RULER itself. memexp searches
per sample instead, so every input ends within one haystack unit of the target; the draws
of a sample do not depend on its size (`sample_rng`), so its text at a given size is still
the official generator's text for that random state.
"""

from __future__ import annotations

from memexp.backbones.base import InputFeed, Tokenizer
from memexp.benchmarks.ruler.length import TokenBudget, TooShort, largest_fitting, split_answer_prefix
from memexp.benchmarks.ruler.sample import Generator, Sample, sample_rng
from memexp.core.schema import ConfigError
from memexp.core.types import Example, Question


def _too_short(task: str, length: int, size: int, tokens: int, max_new_tokens: int) -> ConfigError:
    return ConfigError(
        f"bench.lengths={length} is too short for {task}: its smallest input ({size} haystack units) "
        f"takes {tokens} tokens including max_new_tokens={max_new_tokens}"
    )


def fit_sample(task: str, index: int, generator: Generator, budget: TokenBudget, *, seed: int,
               start: int) -> tuple[int, Sample, int]:
    """(haystack size, sample, total tokens) of sample `index` with the largest haystack
    that fits `budget.length`. `start` is where the search begins (the previous sample's size: neighbours
    differ by a unit or two, so the search usually takes two builds)."""
    built: dict[int, tuple[Sample, int]] = {}

    def probe(size: int) -> int:
        sample = generator.build(index, size, sample_rng(task, seed, index))
        built[size] = (sample, budget.total(sample))
        return built[size][1]

    try:
        size = largest_fitting(probe, budget.length, start=start, low=generator.min_size, high=generator.max_size)
    except TooShort as e:
        raise _too_short(task, budget.length, e.size, e.tokens, budget.max_new_tokens) from None
    if size == generator.max_size:
        raise generator.exhausted(size)
    return (size, *built[size])


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
    answer_prefix: str = "",
    feed: InputFeed | None = None,
) -> list[Example]:
    """`answer_prefix`: the task template's (unformatted) answer prefix (split off each prompt by
    `split_answer_prefix`); `feed`: how the runner feeds each input (a chat template's tokens then
    count inside `length`), None for the plain form."""
    budget = TokenBudget(tokenizer, length, max_new_tokens, feed, answer_prefix)
    examples, start = [], generator.incremental
    for index in range(num_samples):
        start, sample, total = fit_sample(task, index, generator, budget, seed=seed, start=start)
        examples.append(_example(task, length, index, sample, total, max_new_tokens, metric, answer_prefix))
    return examples


def _example(
    task: str, length: int, index: int, sample: Sample, total: int, max_new_tokens: int, metric: str,
    answer_prefix: str,
) -> Example:
    example_id = f"{task}/{length}/{index}"
    question = Question(
        id=f"{example_id}/0",
        prompt=sample.prompt,
        references=list(sample.answers),
        metric=metric,
        max_new_tokens=max_new_tokens,
        answer_prefix=split_answer_prefix(sample.prompt, answer_prefix)[1],
    )
    meta = {**sample.meta, "tokens": total}
    return Example(id=example_id, task=task, length=length, context=sample.context, questions=[question], meta=meta)
