"""LongBench v2 (THUDM/LongBench repo root: pred.py, result.py, prompts/0shot.txt), zero-shot.

The 0shot template is split after the document's closing `</text>` line: the instruction and the
document are the context, the question, its four choices and the format line are the
prompt. Fields are substituted stripped, as pred.py does. Accuracy uses pred.py's answer
parser; `aggregate` adds result.py's Easy / Hard / Short / Medium / Long columns.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterator

from memexp.backbones.base import Tokenizer
from memexp.benchmarks import datasets as data
from memexp.benchmarks.base import Benchmark
from memexp.benchmarks.longbench_v2.config import LongBenchV2Config
from memexp.benchmarks.metrics import longbench_v2_choice
from memexp.benchmarks.truncation import longbench_v2_ends, middle_truncate
from memexp.core.types import Example, Question, Record

NAME = "longbench_v2"
LOCAL = "/path/data.json (the hub dataset's data.json)"  # what bench.data_path names

TEMPLATE_0SHOT = (
    "Please read the following text and answer the question below.\n\n<text>\n$DOC$\n</text>\n\n"
    "What is the correct answer to this question: $Q$\nChoices:\n(A) $C_A$\n(B) $C_B$\n(C) $C_C$\n(D) $C_D$\n\n"
    'Format your response as follows: "The correct answer is (insert answer here)".'
)
_SPLIT = "\n</text>\n\n"
FIELDS = {"_id": str, "domain": str, "sub_domain": str, "difficulty": str, "length": str, "question": str,
          "choice_A": str, "choice_B": str, "choice_C": str, "choice_D": str, "answer": str, "context": str}


class LongBenchV2(Benchmark):
    name = NAME

    def __init__(self, cfg: LongBenchV2Config | None = None) -> None:
        self.cfg = cfg or LongBenchV2Config()
        self._difficulty: dict[str, str] = {}
        self._skipped: list[str] = []

    def skipped(self) -> list[str]:
        return list(self._skipped)

    def examples(self, tokenizer: Tokenizer) -> Iterator[Example]:
        self._skipped = []
        root = data.resolve(NAME, self.cfg.data_path, self.cfg.cache_dir, lambda d: fetch(self.cfg.hub_id, d),
                            LOCAL)
        path = root / "data.json" if root.is_dir() else root
        rows = data.valid_rows(data.read_rows(path), FIELDS, nonempty=("context",))
        rows = [r for r in data.require_rows(rows, NAME, str(path)) if self.selected(r.data)]
        for row in rows[: self.cfg.num_samples]:
            example = self.example(row.data, tokenizer)
            if example is None:
                self._skipped.append(row.data["_id"])
            else:
                yield example

    def selected(self, record: dict) -> bool:
        cfg = self.cfg
        if not cfg.domains and not cfg.sub_domains:
            return True
        return record["domain"] in cfg.domains or record["sub_domain"] in cfg.sub_domains

    def fits(self, context_len: int, prompt_len: int) -> bool:
        """The paper's rule: the complete prompt fits the position budget after reserving
        room for the chat template, replay and generation (see LongBenchV2Config)."""
        cfg = self.cfg
        reserved = cfg.reserve_template + cfg.reserve_replay + cfg.max_new_tokens
        return context_len + prompt_len + reserved <= cfg.max_length

    def example(self, record: dict, tokenizer: Tokenizer) -> Example | None:
        """The example, or None when it does not fit and `overlength=skip`."""
        context, prompt = render(record)
        max_length = self.cfg.max_length
        if max_length is not None:
            prompt_len = len(tokenizer.encode(prompt))
            context_len = len(tokenizer.encode(context, add_bos=True))
            if self.cfg.overlength == "skip":
                if not self.fits(context_len, prompt_len):
                    return None
            elif context_len + prompt_len > max_length:
                context = middle_truncate(tokenizer, context, prompt_len, max_length, longbench_v2_ends(max_length))
        self._difficulty[record["_id"]] = record["difficulty"]
        question = Question(id="0", prompt=prompt, references=[record["answer"]], metric="accuracy",
                            max_new_tokens=self.cfg.max_new_tokens,
                            meta={"difficulty": record["difficulty"], "length": record["length"]})
        return Example(id=record["_id"], task=record["domain"], length=record["length"], context=context,
                       questions=[question], meta={"sub_domain": record["sub_domain"]})

    def score(self, prediction: str, question: Question) -> float:
        return 100.0 * float(longbench_v2_choice(prediction) == question.references[0])

    def aggregate(self, records: list[Record]) -> dict[str, float]:
        """result.py: accuracy overall, by difficulty and by length."""
        groups: dict[str, list[float]] = defaultdict(list)
        for r in records:
            groups["overall"].append(r.score)
            difficulty = self._difficulty.get(str(r.example_id))
            if difficulty:
                groups[difficulty].append(r.score)
            groups[str(r.length)].append(r.score)
        order = ("overall", "easy", "hard", "short", "medium", "long")
        return {k: round(sum(groups[k]) / len(groups[k]), 1) for k in order if groups.get(k)}


def render(record: dict) -> tuple[str, str]:
    """(context, prompt) with context + prompt == pred.py's filled 0shot template (its
    chained .replace calls, document first, then question and choices)."""
    filled = TEMPLATE_0SHOT.replace("$DOC$", record["context"].strip())
    prompt = TEMPLATE_0SHOT.split(_SPLIT, 1)[1]
    for key, field in (("$Q$", "question"), ("$C_A$", "choice_A"), ("$C_B$", "choice_B"),
                       ("$C_C$", "choice_C"), ("$C_D$", "choice_D")):
        filled = filled.replace(key, record[field].strip())
        prompt = prompt.replace(key, record[field].strip())
    return filled[: len(filled) - len(prompt)], prompt


def fetch(hub_id: str, dest: Path) -> None:
    data.hub_file(hub_id, "data.json", dest / "data.json")


def download(cfg: LongBenchV2Config) -> Path:
    return data.ensure_cached(NAME, cfg.cache_dir, lambda d: fetch(cfg.hub_id, d), LOCAL)
