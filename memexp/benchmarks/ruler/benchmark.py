"""RULER as a memexp benchmark: examples generated locally for the backbone's tokenizer,
cached on disk, scored with RULER's string match."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Iterator

from memexp.backbones.base import InputFeed, Tokenizer
from memexp.benchmarks import hub
from memexp.benchmarks.base import Benchmark
from memexp.benchmarks.metrics import ruler_postprocess, string_match_all, string_match_part
from memexp.benchmarks.ruler import cache, sources
from memexp.benchmarks.ruler.common_words import CommonWordsGenerator
from memexp.benchmarks.ruler.config import RulerConfig
from memexp.benchmarks.ruler.freq_words import FreqWordsGenerator
from memexp.benchmarks.ruler.generate import generate_examples
from memexp.benchmarks.ruler.haystacks import EssayHaystack
from memexp.benchmarks.ruler.niah import NiahGenerator
from memexp.benchmarks.ruler.qa import QaData, QaGenerator, read_hotpotqa, read_squad
from memexp.benchmarks.ruler.sample import Generator, sample_rng
from memexp.benchmarks.ruler.sentences import splitter_version
from memexp.benchmarks.ruler.tasks import (
    TASKS,
    CommonWordsTask,
    FreqWordsTask,
    NiahTask,
    QaTask,
    VariableTrackingTask,
    needs_essays,
)
from memexp.benchmarks.ruler.templates import COMMON_WORDS, FREQ_WORDS, NIAH, QA, VARIABLE_TRACKING, TaskTemplate
from memexp.benchmarks.ruler.variable_tracking import VariableTrackingGenerator
from memexp.benchmarks.ruler.vocabulary import wordlists_fingerprint
from memexp.core.types import Example, Question

METRICS = {"string_match_all": string_match_all, "string_match_part": string_match_part}


def _template(spec) -> TaskTemplate:
    return {
        NiahTask: NIAH,
        VariableTrackingTask: VARIABLE_TRACKING,
        CommonWordsTask: COMMON_WORDS,
        FreqWordsTask: FREQ_WORDS,
        QaTask: QA,
    }[type(spec)]


class Ruler(Benchmark):
    """RULER's synthetic tasks (NVIDIA/RULER scripts/synthetic.yaml).

    Examples come length by length, task by task in the configured order, then by index.
    Each is a pure function of (task, length, seed, tokenizer, outside sources) and is
    cached under `cache_dir`.
    """

    name = "ruler"

    def __init__(self, cfg: RulerConfig) -> None:
        self.cfg = cfg
        self._loaded: dict[str, sources.Loaded] = {}
        self._essays: EssayHaystack | None = None
        self._qa: dict[str, QaData] = {}
        self._feed: InputFeed | None = None

    def size_with(self, feed: InputFeed) -> None:
        """With a chat template the template's tokens count inside each target length (RULER's
        prepare.py with a model template); without one the plain form is counted, as before."""
        self._feed = feed if feed.chat else None

    def max_new_tokens(self, task: str) -> int:
        return self.cfg.max_new_tokens or _template(TASKS[task]).tokens_to_generate

    def metric(self, task: str) -> str:
        return "string_match_part" if isinstance(TASKS[task], QaTask) else "string_match_all"

    def num_examples(self) -> int:
        return len(self.cfg.tasks) * len(self.cfg.lengths) * self.cfg.num_samples

    def examples(self, tokenizer: Tokenizer) -> Iterator[Example]:
        # a missing source stops the run before the first example, not halfway through it
        for task in self.cfg.tasks:
            self._sources(task)
        fingerprint = cache.tokenizer_fingerprint(tokenizer)
        for length in self.cfg.lengths:
            for task in self.cfg.tasks:
                yield from self.task_examples(task, length, tokenizer, fingerprint)

    def task_examples(self, task: str, length: int, tokenizer: Tokenizer, fingerprint: str | None = None) -> list[Example]:
        """The `num_samples` examples of one task at one length, from the cache when there."""
        inputs = {
            "task": task,
            "spec": dataclasses.asdict(TASKS[task]),
            "length": length,
            "seed": self.cfg.seed,
            "max_new_tokens": self.max_new_tokens(task),
            "tokenizer": fingerprint or cache.tokenizer_fingerprint(tokenizer),
            "sources": {name: loaded.fingerprint for name, loaded in self._sources(task).items()},
        }
        if self._feed is not None:  # only then: the plain form's cache keys stay as they were
            inputs["chat_template"] = self._feed.template_fingerprint()
        key = cache.cache_key(inputs)
        path = cache.cache_path(self.cfg.cache_dir, task, length, key)
        cached = cache.load(path, key, self.cfg.num_samples)
        if cached is not None:
            return cached
        examples = generate_examples(
            task,
            length,
            self._generator(task, length, tokenizer),
            tokenizer,
            seed=self.cfg.seed,
            num_samples=self.cfg.num_samples,
            max_new_tokens=self.max_new_tokens(task),
            metric=self.metric(task),
            answer_prefix=_template(TASKS[task]).answer_prefix,
            feed=self._feed,
        )
        if self.cfg.essay_standin and needs_essays(task):
            from memexp.benchmarks.ruler.standin import STANDIN_SOURCE

            for example in examples:
                example.source = STANDIN_SOURCE
        cache.save(path, key, inputs, examples)
        return examples

    def score(self, prediction: str, question: Question) -> float:
        return METRICS[question.metric](prediction, question.references)

    def postprocess(self, generated: str, question: Question) -> str:
        return ruler_postprocess(generated)

    def _load(self, name: str, load) -> sources.Loaded:
        if name not in self._loaded:
            self._loaded[name] = load()
        return self._loaded[name]

    def _sources(self, task: str) -> dict[str, sources.Loaded]:
        """What the task's examples are made from besides code: each source's content hash
        goes into the cache key."""
        cfg, spec = self.cfg, TASKS[task]
        found: dict[str, sources.Loaded] = {}
        if needs_essays(task):
            essay_tasks = [t for t in cfg.tasks if needs_essays(t)]
            found["essays"] = self._load("essays", lambda: sources.load_essays(cfg.essay_path, essay_tasks,
                                                                                   cfg.essay_standin))
            found["splitter"] = sources.Loaded(None, splitter_version())
        if isinstance(spec, (NiahTask, CommonWordsTask)):
            found["wordlists"] = sources.Loaded(None, wordlists_fingerprint())
        if isinstance(spec, CommonWordsTask) and cfg.cwe_words_path:
            found["cwe_words"] = self._load("cwe_words", lambda: sources.load_words(cfg.cwe_words_path))
        if isinstance(spec, QaTask) and spec.dataset == "squad":
            found["squad"] = self._load("squad", lambda: sources.load_squad(cfg.squad_path))
        if isinstance(spec, QaTask) and spec.dataset == "hotpotqa":
            found["hotpotqa"] = self._load("hotpotqa", lambda: sources.load_hotpotqa(cfg.hotpotqa_path))
        return found

    def _generator(self, task: str, length: int, tokenizer: Tokenizer) -> Generator:
        cfg, spec = self.cfg, TASKS[task]
        loaded = self._sources(task)
        if isinstance(spec, NiahTask):
            if spec.haystack == "essay" and self._essays is None:
                self._essays = EssayHaystack(loaded["essays"].value)
            return NiahGenerator(spec, length, cfg.seed, self._essays if spec.haystack == "essay" else None)
        if isinstance(spec, VariableTrackingTask):
            return VariableTrackingGenerator(
                spec,
                length,
                icl_tokens=lambda text: len(tokenizer.encode(text)),
                icl_rng=lambda: sample_rng(f"{task}/worked-example", cfg.seed, 0),
            )
        if isinstance(spec, CommonWordsTask):
            extra = loaded["cwe_words"].value if "cwe_words" in loaded else None
            return CommonWordsGenerator(spec, length, cfg.seed, extra)
        if isinstance(spec, FreqWordsTask):
            return FreqWordsGenerator(spec, length, cfg.seed, self.max_new_tokens(task))
        if spec.dataset not in self._qa:
            reader = read_squad if spec.dataset == "squad" else read_hotpotqa
            self._qa[spec.dataset] = reader(loaded[spec.dataset].value)
        return QaGenerator(task, self._qa[spec.dataset], cfg.seed)


def download(cfg: RulerConfig) -> Path:
    """`python -m memexp data bench=ruler`: every hub source RULER's tasks read (essays, SQuAD,
    HotpotQA) into the Hugging Face cache, whichever tasks are configured, so any later task
    list runs offline; each source's place goes to stderr."""
    for name, where in sources.prefetch(cfg):
        print(f"[memexp] ruler {name}: {where}", file=sys.stderr)
    return Path(hub.cache_dir())
