"""Training examples of the notebank_lora recipe (App. C.4): (context, question, answer) texts,
then token ids.

`nq`: rows of the fine-tune collection whose text is an NQ multi-document prompt with its answer
(see `DataConfig`); the context is capped at `max_context_chars` (cut at the last document start
before the cap, memexp's choice; a hard cut when none fits), the gold-document trailer is removed
from the answer, answers of min..max words are kept, and each example is `answerable` when its
answer string occurs in the capped context (else a no-support example, which keeps its gold
answer). The pool is shuffled once with `shuffle_seed` and the first `examples` are used.
`ruler`: memexp's RULER generator on the training seed (the tiny recipes).
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from memexp.benchmarks.base import Question
from memexp.config import ConfigError
from memexp.training.notebank_lora.recipe import DataConfig

DATA_SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclass(frozen=True)
class TextExample:
    id: str
    context: str
    question: str
    answer: str
    answerable: bool


@dataclass(frozen=True)
class TrainExample:
    """Token ids: the context (BOS first), the question, the target (answer ids then EOS)."""

    text: TextExample
    context_ids: list[int]
    question_ids: list[int]
    target_ids: list[int]
    question: Question  # what NoteBank's routers read (the prompt, the answer for the oracle router)


def parse_nq(text: str, d: DataConfig, row_id: str) -> TextExample | None:
    """One NQ example from a row's text, or None when the row is another source or filtered out."""
    q = text.rfind(d.question_marker)
    a = text.rfind(d.answer_marker)
    if q < 0 or a < q or d.document_marker not in text[:q]:
        return None
    question = text[q + len(d.question_marker):a].strip()
    answer = re.sub(d.trailer_pattern, "", text[a + len(d.answer_marker):].strip()).strip()
    if not question or not d.min_answer_words <= len(answer.split()) <= d.max_answer_words:
        return None
    context = cap_context(text[:q].rstrip(), d.max_context_chars, d.document_marker)
    return TextExample(row_id, context, question, answer, answer.lower() in context.lower())


def cap_context(context: str, limit: int, marker: str) -> str:
    """`context` within `limit` characters, cut before the last document that would cross it."""
    if len(context) <= limit:
        return context
    cut = context.rfind(marker, 0, limit)
    return context[:cut].rstrip() if cut > 0 else context[:limit]


def read_rows(path: Path, field: str) -> Iterator[tuple[str, str]]:
    """(row id, text) of every row of a .jsonl / .json / .parquet file, or of a folder's files
    (sorted by name, so the pool's order, and the shuffle, do not depend on the file system)."""
    files = sorted(p for p in path.rglob("*") if p.suffix in DATA_SUFFIXES) if path.is_dir() else [path]
    if not files:
        raise ConfigError(f"recipe.data_path={path}: no {', '.join(DATA_SUFFIXES)} file there")
    for f in files:
        for i, row in enumerate(_rows(f)):
            if not isinstance(row, dict) or not isinstance(row.get(field), str):
                raise ConfigError(f"recipe.data_path: {f} row {i} has no text field {field!r} "
                                  f"(recipe.data.text_field names it)")
            yield f"{f.name}:{i}", row[field]


def _rows(f: Path) -> Iterator[dict]:
    if f.suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.read_table(f).to_pylist()
    elif f.suffix == ".json":
        yield from json.loads(f.read_text())
    else:
        with open(f) as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


def hub_files(d: DataConfig, download: bool = False) -> Path:
    """The local snapshot of `d.hub_id` (downloaded with `download`), or a one-line ConfigError."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(d.hub_id, repo_type="dataset", local_files_only=not download))
    except Exception as e:  # offline, no cached snapshot, or a hub error: say how to get the data
        if download:
            raise ConfigError(f"{d.hub_id}: download failed ({type(e).__name__}); on a machine without the hub, "
                              f"pass recipe.data_path=<local copy>") from None
        raise ConfigError(f"recipe.data_path is null and {d.hub_id} is not available here ({type(e).__name__}); "
                          f"fetch it with `python -m memexp data recipe=notebank_lora` on a connected machine, "
                          f"or pass recipe.data_path=<local copy>") from None


def nq_examples(d: DataConfig, data_path: str | None) -> list[TextExample]:
    path = Path(data_path).expanduser() if data_path else hub_files(d)
    if not path.exists():
        raise ConfigError(f"recipe.data_path={data_path}: no such file or directory")
    pool = [ex for row_id, text in read_rows(path, d.text_field) if (ex := parse_nq(text, d, row_id))]
    if not pool:
        raise ConfigError(f"recipe.data_path={path}: no row holds an NQ example ({d.document_marker!r} ... "
                          f"{d.question_marker!r} ... {d.answer_marker!r} in field {d.text_field!r})")
    random.Random(d.shuffle_seed).shuffle(pool)
    return pool[:d.examples]


def ruler_examples(d: DataConfig, tokenizer) -> list[TextExample]:
    from memexp.benchmarks.ruler import Ruler
    from memexp.benchmarks.ruler.config import RulerConfig

    out = []
    with tempfile.TemporaryDirectory() as cache:
        bench = Ruler(RulerConfig(tasks=list(d.tasks), lengths=list(d.lengths), num_samples=d.samples, seed=d.seed,
                                  cache_dir=cache, **d.ruler))
        for length in d.lengths:
            for task in d.tasks:
                for ex in bench.task_examples(task, length, tokenizer):
                    for q in ex.questions:
                        out.append(TextExample(f"{ex.id}/{q.id}", ex.context, q.prompt, ", ".join(q.references), True))
    random.Random(d.shuffle_seed).shuffle(out)
    return out[:d.examples]


def train_examples(d: DataConfig, data_path: str | None, tokenizer) -> list[TrainExample]:
    texts = nq_examples(d, data_path) if d.source == "nq" else ruler_examples(d, tokenizer)
    return [tokenize(t, d, tokenizer) for t in texts]


def tokenize(t: TextExample, d: DataConfig, tokenizer) -> TrainExample:
    prompt = d.question_template.format(question=t.question)
    target = tokenizer.encode(d.answer_template.format(answer=t.answer))[:d.max_target_tokens] + [tokenizer.eos_id]
    question = Question(id=t.id, prompt=prompt, references=[t.answer], metric="string_match_all",
                        max_new_tokens=len(target))
    return TrainExample(t, tokenizer.encode(d.context_template.format(context=t.context), add_bos=True),
                        tokenizer.encode(prompt), target, question)
