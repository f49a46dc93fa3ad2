"""The types every layer shares: a benchmark's `Example` and `Question` (what methods answer) and
the `Record` of one answered question (what the runner writes, benchmarks aggregate and reports
read). They live at the bottom so that a method never imports a benchmark, nor a benchmark the run."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping


@dataclass
class Question:
    """One question about an example's context.

    `prompt` is the text the model reads after the context (question and answer prefix);
    `prediction = postprocess(generated text)` is scored against `references` with `metric`.
    Decoding is greedy, up to `max_new_tokens`; it ends at the tokenizer's stop ids and at the
    last token of each string in `stop` (LongBench's pred.py adds "\n" that way), neither of
    which may end it before `min_new_tokens` tokens. `chat_template=False` keeps the question
    (and its example's context) out of the backbone's chat template even with `backbone.chat`
    (LongBench's pred.py does so for trec, triviaqa and samsum); the context is shared, so the
    example's first question decides. `answer_prefix` is the end of `prompt` that opens the
    answer (RULER's " The special magic numbers ... are"): without a chat template the model
    reads `prompt` as it is; with one, the prefix moves after the assistant header, where
    RULER's model templates put it (prepare.py: model_template(task) + answer_prefix). `meta` is benchmark-private: only the benchmark's own
    postprocess / score / aggregate read it; the runner and methods never do.
    """

    id: str
    prompt: str
    references: list[str]
    metric: str
    max_new_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)
    stop: list[str] = field(default_factory=list)
    min_new_tokens: int = 0
    chat_template: bool = True
    answer_prefix: str = ""

    def __post_init__(self) -> None:
        if not self.prompt.endswith(self.answer_prefix):
            raise ValueError(f"question {self.id}: answer_prefix {self.answer_prefix!r} does not end its prompt")

    @property
    def user_prompt(self) -> str:
        """`prompt` without its answer prefix: the part inside a chat template's user turn."""
        return self.prompt[: len(self.prompt) - len(self.answer_prefix)]


@dataclass
class Example:
    """A context and its questions. `length` is the benchmark's length bucket (RULER's
    target length in tokens, LongBench's '0-4k'... bucket), the column of the summary table.
    `system` is the system prompt a chat template puts before the context (LongHealth's,
    MemoryAgentBench's agent message); None for none. `meta` is benchmark-private, as
    `Question.meta`. `bos=False` feeds the context without the tokenizer's begin-of-text token
    (a format trained without one: the Titan-Llama authors' QuALITY SFT)."""

    id: str
    task: str
    length: int | str
    context: str
    questions: list[Question]
    meta: dict[str, Any] = field(default_factory=dict)
    system: str | None = None
    # where the text came from when it is not the benchmark's own data (RULER's generated essay
    # stand-in): every record of the example copies it, so no score is mistaken for the real one
    source: str | None = None
    bos: bool = True


# In Record.seconds of a job that shared its read with others (memexp.run.groups): how many jobs the
# one read timed as "read" served. A count, not seconds: a latency figure divides by it.
READ_SHARED_BY = "read_shared_by"


@dataclass(kw_only=True)
class Record:
    """One answered question: one line of records.jsonl.

    The field order is the JSON key order of the line; the optional fields (`question`,
    `costs`, `source`, `context_excerpts`) are left out of the line when None, so records written before they existed load
    and compare unchanged. The identity, task, length and score are what a
    summary needs; the rest default to empty so a record made by hand (a test, another tool)
    may leave them out.
    """

    example_id: str
    question_id: str
    task: str
    length: int | str
    question: str | None = None  # the text read after the context (the question's prompt)
    prediction: str = ""
    references: list[str] = field(default_factory=list)
    score: float
    metric: str = ""
    tokens: dict[str, int] = field(default_factory=dict)  # tokens read per kind; "context" first
    seconds: dict[str, float] = field(default_factory=dict)  # "read", "read/<stage>", then answer stages (READ_SHARED_BY)
    method_stats: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable method figures
    costs: dict[str, Any] | None = None  # memexp.costs.report per-record figures, or {"error": ...}
    source: str | None = None  # Example.source: the text is a stand-in for the benchmark's data (None: its own)
    # the context around each reference answer (memexp.run.excerpts), for a question view; None: not kept
    context_excerpts: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ValueError(f"record {self.key}: {problem}")

    def problem(self) -> str | None:
        """What makes this record unusable (a field of the wrong type; a score that is not a finite
        number in [0, 100], the range of every metric), or None: such a record would crash a
        resume or carry NaN into a summary, so it is never written, and a line holding one is
        read as a corrupt line."""
        for name, kinds in _FIELD_TYPES.items():
            value = getattr(self, name)
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                allowed = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
                return f"{name} is {json.dumps(value, default=repr)}, not {allowed}"
        if not (math.isfinite(self.score) and 0 <= self.score <= 100):
            return f"score is {self.score!r}, not a finite number in [0, 100]"
        return None

    @property
    def key(self) -> tuple[str, str]:
        return (str(self.example_id), str(self.question_id))

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if not (f.name in _OPTIONAL and getattr(self, f.name) is None)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Record:
        unknown = sorted(set(obj) - _RECORD_FIELDS)
        if unknown:
            raise ValueError(f"record {record_key(obj)}: unknown fields {', '.join(unknown)}")
        return cls(**obj)


_RECORD_FIELDS = frozenset(f.name for f in fields(Record))
_NONE = type(None)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "example_id": (str, int), "question_id": (str, int), "task": (str,), "length": (int, str),
    "question": (str, _NONE), "prediction": (str,), "references": (list,), "score": (int, float), "metric": (str,),
    "tokens": (dict,), "seconds": (dict,), "method_stats": (dict,), "costs": (dict, _NONE), "source": (str, _NONE),
    "context_excerpts": (list, _NONE)}
_OPTIONAL = ("question", "costs", "source", "context_excerpts")


def record_key(rec: Mapping[str, Any]) -> tuple[str, str]:
    """A record's JSON object's (example id, question id), as `Record.key`."""
    return (str(rec["example_id"]), str(rec["question_id"]))
