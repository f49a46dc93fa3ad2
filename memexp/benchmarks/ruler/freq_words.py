"""Frequent words extraction (fwe), as NVIDIA/RULER scripts/data/synthetic/
freq_words_extraction.py generates it: coded words drawn with Zipf frequencies, the most
frequent one being the noise word '...'; the answer is the next three."""

from __future__ import annotations

import math
import random
import string
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from memexp.benchmarks.ruler.sample import Sample
from memexp.benchmarks.ruler.tasks import FreqWordsTask
from memexp.benchmarks.ruler.templates import FREQ_WORDS, split_prompt
from memexp.core.schema import ConfigError

# B_2k / (2k)! for the Euler-Maclaurin remainder of the zeta sum
_BERNOULLI_OVER_FACTORIAL = [
    Fraction(1, 6) / math.factorial(2),
    Fraction(-1, 30) / math.factorial(4),
    Fraction(1, 42) / math.factorial(6),
    Fraction(-1, 30) / math.factorial(8),
    Fraction(5, 66) / math.factorial(10),
    Fraction(-691, 2730) / math.factorial(12),
    Fraction(7, 6) / math.factorial(14),
    Fraction(-3617, 510) / math.factorial(16),
]


def zeta(s: float, terms: int = 20) -> float:
    """Riemann zeta for real s > 1 (RULER calls scipy.special.zeta(alpha)).

    Euler-Maclaurin summation in 50-digit decimals, so the float returned is the
    correctly rounded value. At RULER's alpha = 2 it equals scipy's (pi**2 / 6); at
    some other alphas scipy is one ulp off."""
    if s <= 1:
        raise ValueError(f"zeta needs s > 1, got {s}")
    with localcontext() as ctx:
        ctx.prec = 50
        x, n = Decimal(s), Decimal(terms)
        total = sum(Decimal(k) ** -x for k in range(1, terms))
        total += n ** (1 - x) / (x - 1) + n**-x / 2
        rising, power = x, n ** (-x - 1)
        for k, c in enumerate(_BERNOULLI_OVER_FACTORIAL):
            total += Decimal(c.numerator) / Decimal(c.denominator) * rising * power
            rising *= (x + 2 * k + 1) * (x + 2 * k + 2)
            power /= n * n
        return float(total)


class FreqWordsGenerator:
    def __init__(self, spec: FreqWordsTask, length: int, seed: int, max_new_tokens: int) -> None:
        self.spec, self.seed = spec, seed
        input_length = length - max_new_tokens
        self.vocab_size = input_length // 50
        if self.vocab_size < 4:
            raise ConfigError(
                f"bench.lengths={length} is too short for fwe: it needs at least {200 + max_new_tokens} tokens "
                f"(a vocabulary of (length - max_new_tokens) // 50 >= 4 coded words)"
            )
        self.incremental = max(1, input_length // 32)
        self.min_size = 1
        self.max_size = None
        self.powers = np.arange(1, self.vocab_size + 1) ** -spec.alpha
        self.normaliser = zeta(spec.alpha)

    def build(self, index: int, size: int, rng: random.Random) -> Sample:
        wordlen = self.spec.coded_wordlen
        vocab = ["".join(rng.choices(string.ascii_lowercase, k=wordlen)) for _ in range(self.vocab_size)]
        while len(set(vocab)) < self.vocab_size:
            vocab.append("".join(rng.choices(string.ascii_lowercase, k=wordlen)))
        vocab = sorted(set(vocab))
        random.Random(self.seed).shuffle(vocab)
        vocab[0] = "..."
        counts = (size * self.powers / self.normaliser).astype(int)  # RULER's order of operations
        words = [w for w, c in zip(vocab, counts) for _ in range(c)]
        random.Random(self.seed).shuffle(words)
        head, prompt = split_prompt(FREQ_WORDS.full)
        answers = vocab[1:4]
        return Sample(context=head + " ".join(words), prompt=prompt, answers=answers, meta={"size": size})
