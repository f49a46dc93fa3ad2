"""A stand-in for RULER's essay haystack, made offline: essay-like sentences generated here.

RULER's essay tasks (niah_single_2/3, niah_multikey_1, niah_multiquery, niah_multivalue)
hide their needles in Paul Graham's essays, which are not on an offline machine and may not
be copied into the repository. `bench.essay_standin=true` builds the haystack from this
text instead: sentences from a small fixed grammar over words of the wonderwords lists
that RULER's key vocabulary already installs (memexp.benchmarks.ruler.vocabulary). It reads
like prose to a tokenizer (varied words, sentence punctuation, no repetition of one line
as in the noise haystack), but it is not an essay: scores on it are not RULER's. Every
record of such a run says so (`Record.source`, STANDIN_SOURCE).

The word subset is fixed (the same for every seed), so a tokenizer trained on one seed's
text covers another's; `seed` only changes the sequence of sentences. Evaluation uses
seed 0 (EVAL_SEED); the tiny_gdn_words recipe trains on other seeds.
"""

from __future__ import annotations

import random
from functools import lru_cache

from memexp.benchmarks.ruler.vocabulary import adjectives, nouns, verbs

EVAL_SEED = 0
STANDIN_SOURCE = "essay stand-in (memexp.benchmarks.ruler.standin), not the Paul Graham essays"
NUM_WORDS = 40_000  # longer haystacks repeat the text, as RULER does with its essays

OPENERS = ("In my experience", "Most of the time", "For a long while", "As it turns out", "Years ago",
           "In the end", "At first", "Oddly enough", "Looking back", "Every so often")
FRAMES = (
    "{opener}, the {adj} {noun} would {verb} the {noun2}.",
    "People who {verb} a {noun} rarely think about the {adj} {noun2}.",
    "{opener}, I tried to {verb} the {noun} before the {noun2} was ready.",
    "The {noun} is {adj}, and that is why so many of us {verb} it.",
    "If you want to {verb} a {adj} {noun}, start with the {noun2}.",
    "What matters is not the {noun} but how you {verb} the {adj} {noun2}.",
    "A {adj} {noun} can {verb} almost anything, even a {noun2}.",
    "{opener}, nobody wanted to {verb} the {noun}.",
    "You learn more from one {adj} {noun} than from ten {noun2} reports.",
    "The best way to {verb} is to find a {noun} that is already {adj}.",
)


def _plain(words) -> list[str]:
    # one-word, lower-case entries only: multi-word ("ad hoc") and hyphenated list entries
    # would make sentences the splitter or a word tokenizer reads unlike the rest
    return sorted(w for w in words if w.isalpha() and w.islower())


@lru_cache(maxsize=1)
def word_subset() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(adjectives, nouns, verbs) the stand-in draws from: fixed, seed-independent."""
    pick = random.Random("ruler-standin/words")
    return (tuple(pick.sample(_plain(adjectives()), 150)), tuple(pick.sample(_plain(nouns()), 400)),
            tuple(pick.sample(_plain(verbs()), 150)))


def sentence(rng: random.Random) -> str:
    adj, noun, verb = word_subset()
    frame = rng.choice(FRAMES)
    return frame.format(opener=rng.choice(OPENERS), adj=rng.choice(adj), noun=rng.choice(noun),
                        noun2=rng.choice(noun), verb=rng.choice(verb))


@lru_cache(maxsize=4)
def standin_text(seed: int = EVAL_SEED, num_words: int = NUM_WORDS) -> str:
    """About `num_words` words of stand-in prose, deterministic in `seed`; paragraphs of 4-8 sentences."""
    rng = random.Random(f"ruler-standin/{seed}")
    paragraphs, count = [], 0
    while count < num_words:
        paragraph = " ".join(sentence(rng) for _ in range(rng.randint(4, 8)))
        paragraphs.append(paragraph)
        count += len(paragraph.split())
    return "\n\n".join(paragraphs)
