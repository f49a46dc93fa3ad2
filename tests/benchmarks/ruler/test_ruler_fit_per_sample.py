"""Every sample is fitted on its own: none loses a whole `incremental` of haystack because
another sample (sample 0) set the size for all of them.

Counted on 20 samples per task, with the byte tokenizer and with a small BPE tokenizer
trained here, where tokens per needle vary from sample to sample."""

from __future__ import annotations

import pytest
from ruler_fixtures import ESSAY

from memexp.backbones.tokenizer import HFTokenizer
from memexp.benchmarks.ruler.length import TokenBudget
from memexp.benchmarks.ruler.sample import sample_rng

SAMPLES = 20


def bpe_tokenizer() -> HFTokenizer:
    """A 400-token byte-level BPE trained on the essay stand-in and RULER's needle wording:
    digits and hyphenated keys split into a varying number of tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = [ESSAY] * 4 + ["One of the special magic numbers for quiet-river is: 1234567. 9081726 5544332"] * 4
    tok.train_from_iterator(corpus, trainer)
    return HFTokenizer(tok, tok.token_to_id("<s>"), tok.token_to_id("</s>"))


def short_counts(ruler, task: str, length: int, tokenizer) -> tuple[int, int]:
    """(samples an increment short, samples whose haystack could take one more unit): a
    sample is an increment short when the same draws with `incremental - 1` more units
    would still fit, i.e. it lost (nearly) a whole increment."""
    examples = ruler.task_examples(task, length, tokenizer)
    generator = ruler._generator(task, length, tokenizer)
    budget = TokenBudget(tokenizer, length, ruler.max_new_tokens(task))
    assert len(examples) == SAMPLES
    short = loose = 0
    for i, e in enumerate(examples):
        q = e.questions[0]
        total = len(tokenizer.encode(e.context, add_bos=True)) + len(tokenizer.encode(q.prompt)) + q.max_new_tokens
        assert total == e.meta["tokens"] <= length
        bigger = e.meta["size"] + generator.incremental - 1
        short += budget.total(generator.build(i, bigger, sample_rng(task, ruler.cfg.seed, i))) <= length
        loose += budget.total(generator.build(i, e.meta["size"] + 1, sample_rng(task, ruler.cfg.seed, i))) <= length
    return short, loose


@pytest.mark.parametrize("task", ["niah_multiquery", "niah_multivalue", "niah_single_2", "niah_single_1",
                                  "niah_multikey_2"])
def test_byte_tokenizer_4k_seed_1201_no_sample_is_an_increment_short(make_ruler, tokenizer, task):
    ruler = make_ruler(tasks=[task], lengths=[4096], num_samples=SAMPLES, seed=1201)
    assert short_counts(ruler, task, 4096, tokenizer) == (0, 0)


@pytest.mark.parametrize("task", ["niah_multiquery", "niah_multivalue", "niah_single_3", "niah_multikey_3"])
def test_bpe_tokenizer_no_sample_is_an_increment_short(make_ruler, task):
    tokenizer = bpe_tokenizer()
    ruler = make_ruler(tasks=[task], lengths=[8192], num_samples=SAMPLES)
    assert short_counts(ruler, task, 8192, tokenizer) == (0, 0)


def test_multiquery_4k_lengths_all_within_one_increment_of_the_target(make_ruler, tokenizer):
    # the numbers: 8 of 20 inputs came out 761 tokens long instead of about 3,950
    ruler = make_ruler(tasks=["niah_multiquery"], lengths=[4096], num_samples=SAMPLES, seed=1201)
    lengths = [e.meta["tokens"] for e in ruler.task_examples("niah_multiquery", 4096, tokenizer)]
    # one more essay word costs at most a few dozen bytes: every input ends within 64 of the target
    assert sum(4096 - 64 < n <= 4096 for n in lengths) == SAMPLES
