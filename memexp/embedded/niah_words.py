"""Training text for tiny_gdn_words: RULER's six NIAH tasks in their own format, nothing else.

Every example is what `bench=ruler` feeds a model, built by memexp's RULER generator
(memexp.benchmarks.ruler.niah.NiahGenerator): RULER's task text, a haystack (the noise
lines or essay-like prose), the needles at depths RULER draws, RULER's question and answer
prefix, then the target: the needles' values in document order, " v1, v2." and EOS. The
tasks are niah_single_1/2/3, niah_multikey_1, niah_multiquery and niah_multivalue, plus
variants in the same format (VARIANTS): word values, so values are numbers, words and UUIDs,
and, where a stage names them, several needles of which only some are asked, so the key
decides the answer.

Never NoteBank's replay form: no example is a needle (or any note) followed by the question
without the task text and haystack around it, and no example starts from a reset state
with a needle; `FORMS` names the two forms generated, so a test can hold it: `ruler`, and
`copy`, the first stage's warm-up (random tokens, then the same tokens again: the loss on the
second copy teaches the model to copy, which the NIAH answers alone teach too slowly on this
machine: 3 value tokens per example against ~100 per copy passage). A copy passage holds no
needle sentence, no question and no value, so it is not a note replayed either.

The essay haystack is memexp's stand-in prose (memexp.benchmarks.ruler.standin) with a
seed drawn per example from the training stream, never the evaluation text's seed 0.
Streams are named "tiny_gdn_words-train/<seed>/...", a prefix RULER's evaluation streams
("{task}/{seed}/{index}") never have, so training never draws an evaluation example.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from memexp.backbones.base import Tokenizer
from memexp.benchmarks.ruler.haystacks import EssayHaystack
from memexp.benchmarks.ruler.niah import NiahGenerator
from memexp.benchmarks.ruler.sample import Sample
from memexp.benchmarks.ruler.standin import EVAL_SEED, standin_text
from memexp.benchmarks.ruler.tasks import TASKS, NiahTask

STREAM_PREFIX = "tiny_gdn_words-train"
SIX_TASKS = ("niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multiquery",
             "niah_multivalue")
VARIANTS = {
    # word values (RULER's six tasks use numbers and UUIDs only): the model must copy any value type
    "words_noise": NiahTask("noise", "words", "words"),
    "words_essay": NiahTask("essay", "words", "words"),
    # several needles, some of them asked: of the six tasks only niah_multikey_1 asks for one key among
    # others (the rest ask for every needle in the context), so a model trained on them alone can answer
    # the numbers it finds and ignore the key; these make the key decide the answer. A stage draws them
    # only where its `tasks` list names them (docs/benchmarks.md, "q = k and key-deciding variants")
    "multikey_noise": NiahTask("noise", "words", "numbers", num_k=4),
    "multikey_essay_2": NiahTask("essay", "words", "numbers", num_k=2),
    "multiquery_half": NiahTask("essay", "words", "numbers", num_k=4, num_q=2),
}
# ruler: RULER's full input; copy: a passage of random tokens, a newline, the passage again (the
# warm-up that teaches copying, with no needle, no question and no task text: not a note either)
FORMS = ("ruler", "copy")
QUESTIONS = ("ruler", "prefix")  # RULER's question + answer prefix | the answer prefix alone
MIN_ESSAY_WORDS = 20  # an essay haystack of a word or two would leave the needle almost alone, like a replayed note
NOISE_TOKENS_PER_LINE = 25  # a first guess of the size search below (the noise line is ~25 word tokens)
ESSAY_TOKENS_PER_WORD = 1.3


@dataclass(frozen=True)
class WordsExample:
    """One training sequence: `ids[question_start:answer_start]` is the question (and answer
    prefix), `ids[answer_start:]` the target (values, '.', EOS)."""

    task: str
    ids: list[int]
    answer_start: int
    form: str
    sample: Optional[Sample]  # None for a copy passage
    question_start: int  # = answer_start for a copy passage (no question)


def stream(seed: int, *names) -> random.Random:
    """The random stream of one training example (or of one step's choices)."""
    return random.Random("/".join([STREAM_PREFIX, str(seed), *map(str, names)]))


def spec_of(task: str) -> NiahTask:
    return VARIANTS[task] if task in VARIANTS else TASKS[task]


@lru_cache(maxsize=8)
def _essay(seed: int, words: int) -> EssayHaystack:
    return EssayHaystack(standin_text(seed, words))


def build_sample(task: str, size: int, rng: random.Random) -> Sample:
    """RULER's sample of `task` with a haystack of `size` units (lines or essay words)."""
    spec = spec_of(task)
    essays = None
    if spec.haystack == "essay":
        # a fresh training essay per example, never the evaluation text's seed (EVAL_SEED = 0)
        essays = _essay(rng.randint(EVAL_SEED + 1, 2**31), size + 100)
    generator = NiahGenerator(spec, length=1024, seed=rng.randint(0, 2**31), essays=essays)
    return generator.build(0, max(size, generator.min_size), rng)


def encode(tokenizer: Tokenizer, task: str, sample: Sample, question: str = "ruler") -> WordsExample:
    """The runner's encoding (context with BOS, then the prompt) followed by the target.
    `question="prefix"` keeps only RULER's answer prefix of the prompt (after its "? ")."""
    prompt = sample.prompt if question == "ruler" else "\n" + sample.prompt.split("? ", 1)[1]
    context = tokenizer.encode(sample.context, add_bos=True)
    ids = context + tokenizer.encode(prompt)
    ordered = sorted(sample.meta["needles"], key=lambda n: n["offset"])
    wanted = set(sample.answers)
    values = [n["value"] for n in ordered if n["value"] in wanted]
    target = tokenizer.encode(" " + ", ".join(values) + ".") + [tokenizer.eos_id]
    return WordsExample(task, ids + target, len(ids), "ruler", sample, len(context))


def example(tokenizer: Tokenizer, task: str, max_tokens: int, rng: random.Random,
            question: str = "ruler") -> WordsExample:
    """An example of `task` of at most `max_tokens` tokens, its haystack drawn between a
    quarter and all of what fits (so needles sit at every depth of every context size)."""
    spec = spec_of(task)
    per_unit = ESSAY_TOKENS_PER_WORD if spec.haystack == "essay" else NOISE_TOKENS_PER_LINE
    budget = max_tokens * rng.uniform(0.25, 1.0)
    smallest = MIN_ESSAY_WORDS if spec.haystack == "essay" else 1
    size = max(smallest, int((budget - 120) / per_unit))
    draw = rng.getrandbits(64)
    while True:
        built = encode(tokenizer, task, build_sample(task, size, random.Random(draw)), question)
        if len(built.ids) <= max_tokens or size == smallest:
            return built
        size = max(smallest, int(size * 0.85))


WORD_VARIANTS = ("words_essay", "words_noise")  # what a stage without a `tasks` list draws besides the six


def pick_task(rng: random.Random, variant_share: float) -> str:
    if rng.random() < variant_share:
        return rng.choice(WORD_VARIANTS)
    return rng.choice(SIX_TASKS)


def tokenizer_corpus(seed: int, num_examples: int = 400):
    """Text the tokenizer is trained on: training-stream examples (task text, noise, stand-in
    prose of training seeds, needles), and every key word RULER can draw as it appears in a
    needle and a question ("for {adjective}-{noun} is"), so each is one token."""
    from memexp.benchmarks.ruler.standin import word_subset
    from memexp.benchmarks.ruler.vocabulary import adjectives, nouns

    for i in range(num_examples):
        rng = stream(seed, "tokenizer", i)
        task = pick_task(rng, 0.2)
        sample = build_sample(task, rng.randint(5, 300) if spec_of(task).haystack == "essay" else rng.randint(1, 20),
                              rng)
        yield sample.context + sample.prompt + " " + ", ".join(sample.answers) + "."
    adj, noun = list(adjectives()), list(nouns())
    for i in range(max(len(adj), len(noun))):
        yield f"for {adj[i % len(adj)]}-{noun[i % len(noun)]} is"
    yield " ".join(" ".join(words) for words in word_subset())


def copy_example(vocab: list[int], max_tokens: int, rng: random.Random, bos_id: int, eos_id: int,
                 alphabet: int = 0) -> WordsExample:
    """BOS, a passage of tokens drawn uniformly from `vocab[1:]`, `vocab[0]` (the newline), the same passage,
    EOS; the target is the second passage (and EOS). Its length is drawn so it fits `max_tokens`.
    `alphabet` > 0 draws the passage from that many tokens of `vocab[1:]`, a new choice per passage:
    then one token rarely tells which comes next, as in a UUID (a few hex letters, digit groups and
    '-'), and only a copy keyed on several preceding tokens follows the passage."""
    n = rng.randint(max(4, max_tokens // 8), max(4, (max_tokens - 3) // 2))
    letters = rng.sample(vocab[1:], alphabet) if alphabet else vocab[1:]
    passage = [rng.choice(letters) for _ in range(n)]
    first = [bos_id] + passage + [vocab[0]]
    return WordsExample("copy", first + passage + [eos_id], len(first), "copy", None, len(first))


def copy_vocabulary(tokenizer) -> list[int]:
    """The tokens a copy passage draws from: every token but the special ones, the newline first
    (it separates the two copies)."""
    special = {tokenizer.bos_id, tokenizer.eos_id, tokenizer.tok.token_to_id("<unk>")}
    newline = tokenizer.tok.token_to_id("\n")
    return [newline] + [i for i in range(tokenizer.vocab_size) if i not in special and i != newline]
