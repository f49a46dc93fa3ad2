"""Length targeting: every input fits its target length with the memexp token count, and
is as long as RULER's rule allows."""

from __future__ import annotations

import time

import pytest

from memexp.benchmarks.ruler.length import TokenBudget, TooShort, largest_fitting
from memexp.benchmarks.ruler.sample import sample_rng


class Counted:
    def __init__(self, total):
        self.total, self.calls = total, []

    def __call__(self, size: int) -> int:
        self.calls.append(size)
        return self.total(size)


def test_largest_fitting_linear_lands_exactly_in_few_probes():
    total = Counted(lambda n: 300 + 37 * n)
    assert largest_fitting(total, 1_000_000, start=25) == (1_000_000 - 300) // 37
    assert len(total.calls) <= 6


def test_largest_fitting_uneven_steps():
    # tokens per unit alternate 3 and 40: the secant estimate is off, bisection finishes
    def total(n):
        return 50 + sum(3 if i % 2 else 40 for i in range(n))

    expected = max(n for n in range(1, 400) if total(n) <= 4000)
    assert largest_fitting(total, 4000, start=5) == expected


def test_largest_fitting_bounds():
    assert largest_fitting(lambda n: 10 * n, 10_000, start=5, high=300) == 300
    assert largest_fitting(lambda n: 10 * n, 95, start=500, low=3) == 9
    with pytest.raises(TooShort) as e:
        largest_fitting(lambda n: 100 + 10 * n, 120, start=5, low=3)
    assert (e.value.size, e.value.tokens) == (3, 130)


def test_budget_counts_context_with_bos_prompt_and_generation(tokenizer):
    from memexp.benchmarks.ruler.sample import Sample

    budget = TokenBudget(tokenizer, 100, 7)
    assert budget.total(Sample(context="abc", prompt="de", answers=[])) == 1 + 3 + 2 + 7


CASES = [
    ("niah_single_1", 2048),
    ("niah_single_1", 16384),
    ("niah_single_2", 16384),
    ("niah_multikey_2", 8192),
    ("niah_multiquery", 8192),
    ("vt", 8192),
    ("cwe", 8192),
    ("fwe", 8192),
]


@pytest.mark.parametrize("task,length", CASES)
def test_every_input_fits_and_is_one_increment_from_overflowing(make_ruler, tokenizer, task, length):
    ruler = make_ruler(tasks=[task], lengths=[length], num_samples=12)
    examples = ruler.task_examples(task, length, tokenizer)
    generator = ruler._generator(task, length, tokenizer)
    budget = TokenBudget(tokenizer, length, ruler.max_new_tokens(task))
    largest = max(e.meta["size"] for e in examples)
    for i, e in enumerate(examples):
        q = e.questions[0]
        total = len(tokenizer.encode(e.context, add_bos=True)) + len(tokenizer.encode(q.prompt)) + q.max_new_tokens
        assert total == e.meta["tokens"] <= length
        if e.meta["size"] < largest:
            # RULER drops `incremental` units only when the larger haystack overflowed
            bigger = generator.build(i, e.meta["size"] + generator.incremental, sample_rng(task, 42, i))
            assert budget.total(bigger) > length
    # the search itself is exact: one more unit overflows the first example
    one_more = generator.build(0, examples[0].meta["size"] + 1, sample_rng(task, 42, 0))
    assert budget.total(one_more) > length


def test_max_new_tokens_override_is_budgeted(make_ruler, tokenizer):
    ruler = make_ruler(tasks=["niah_single_1"], lengths=[4096], num_samples=3, max_new_tokens=16)
    for e in ruler.task_examples("niah_single_1", 4096, tokenizer):
        assert e.questions[0].max_new_tokens == 16
        assert e.meta["tokens"] <= 4096
        assert e.meta["tokens"] > 4096 - 25 * 90 - 16


def test_too_short_length_names_task_and_tokens(make_ruler, tokenizer):
    ruler = make_ruler(tasks=["niah_single_1"], lengths=[512], num_samples=1)
    with pytest.raises(ValueError, match=r"bench.lengths=512 is too short for niah_single_1: .* takes 594 tokens"):
        ruler.task_examples("niah_single_1", 512, tokenizer)


@pytest.mark.parametrize("task", ["niah_single_1", "niah_single_2", "niah_multikey_3"])
def test_hundred_examples_at_64k_take_seconds(make_ruler, tokenizer, task):
    ruler = make_ruler(tasks=[task], lengths=[65536], num_samples=100)
    start = time.perf_counter()
    examples = ruler.task_examples(task, 65536, tokenizer)
    assert time.perf_counter() - start < 20
    assert len(examples) == 100 and all(65536 - 4000 < e.meta["tokens"] <= 65536 for e in examples)
