"""Training examples of the notebank_lora recipe (App. C.4): (context, question, answer) texts,
then token ids.

`nq`: the Natural Questions multi-document rows of emozilla/Long-Data-Collections-Fine-Tune (its
card: a Parquet copy of the fine-tune split of togethercomputer/Long-Data-Collections, 98,557 rows,
string columns `text`, `prompt`, `completion`; the NQ rows come from that collection's
natural_questions_10_200_docs.jsonl, 10-200 Wikipedia passages per question). The layout read here
is the one public code that parses that file reads: the prompt is an instruction, then documents
"Document [i](Title: ...) ...", then "Question: ..."; the completion is "Answer: <short answer>\n
Long Answer: <the gold passage's text>\nGold Document ID: <i>". The context (the prompt before the
question) is capped at `max_context_chars` (cut at the last document start before the cap, memexp's
choice; a hard cut when none fits); the trailer (long answer and gold id) is removed from the answer;
answers of min..max words are kept. Support (App. C.4: "natural no-support examples containing
neither the answer string nor a gold-passage match"): `answer` when the answer string occurs in the
capped context (case-insensitive), else `gold` when the gold document "Document [i]" survives the
cap, else `none` (a no-support example, which keeps its gold answer). The pool is shuffled once with
`shuffle_seed`; the first `examples` are drawn; the next `heldout` no-support examples of the shuffled
pool are the diagnostic set (memexp's reading of the paper's "separate set of 354 no-support
validation examples"). `PoolDraw.counts()` is what the recipe prints and records, beside the paper's.
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

from memexp.core.schema import ConfigError
from memexp.core.types import Question
from memexp.training.notebank_lora.recipe import DataConfig

DATA_SUFFIXES = (".jsonl", ".json", ".parquet")


SUPPORT = ("answer", "gold", "none")  # the answer string in the capped context / only the gold passage / neither
# App. C.4's pool and draw, printed beside what a run finds
PAPER_COUNTS = {"pool": 5855, "pool_answerable": 4157, "pool_no_support": 1698,
                "drawn": 2400, "drawn_answerable": 1722, "drawn_no_support": 678, "heldout": 354}


@dataclass(frozen=True)
class TextExample:
    id: str
    context: str
    question: str
    answer: str
    answerable: bool
    support: str = "answer"  # one of SUPPORT; answerable = support != "none"


@dataclass(frozen=True)
class PoolDraw:
    """The filtered pool (file order), the drawn training examples and the held-out diagnostic set."""

    pool: list[TextExample]
    drawn: list[TextExample]
    heldout: list[TextExample]

    def counts(self) -> dict[str, int]:
        def split(examples):
            no = sum(not e.answerable for e in examples)
            return len(examples) - no, no

        out = {"pool": len(self.pool), "drawn": len(self.drawn), "heldout": len(self.heldout)}
        out["pool_answerable"], out["pool_no_support"] = split(self.pool)
        out["drawn_answerable"], out["drawn_no_support"] = split(self.drawn)
        out["pool_gold_only"] = sum(e.support == "gold" for e in self.pool)
        return out

    def summary(self) -> str:
        """One line: the pool and the draw as found, and the paper's (App. C.4)."""
        c, p = self.counts(), PAPER_COUNTS
        return (f"NQ pool {c['pool']:,} = {c['pool_answerable']:,} answerable + {c['pool_no_support']:,} no-support "
                f"(paper {p['pool']:,} = {p['pool_answerable']:,} + {p['pool_no_support']:,}); drawn {c['drawn']:,} = "
                f"{c['drawn_answerable']:,} + {c['drawn_no_support']:,} (paper {p['drawn']:,} = {p['drawn_answerable']:,}"
                f" + {p['drawn_no_support']:,}); held out {c['heldout']:,} no-support (paper {p['heldout']})")


@dataclass(frozen=True)
class TrainExample:
    """Token ids: the context (BOS first), the question, the target (answer ids then EOS)."""

    text: TextExample
    context_ids: list[int]
    question_ids: list[int]
    target_ids: list[int]
    question: Question  # what NoteBank's routers read (the prompt, the answer for the oracle router)


def parse_nq(row: dict, d: DataConfig, row_id: str) -> TextExample | None:
    """One NQ example from a row (its prompt and completion columns, else its text), or None when
    the row is another source or filtered out."""
    prompt, completion = row.get(d.prompt_field), row.get(d.completion_field)
    if not (isinstance(prompt, str) and isinstance(completion, str)):
        prompt, completion = _split_text(row[d.text_field], d)
    q = prompt.rfind(d.question_marker)
    if q < 0 or d.document_marker not in prompt[:q]:
        return None
    question = prompt[q + len(d.question_marker):]
    at = question.find(d.answer_marker)  # a prompt that ends with the answer marker
    question = (question[:at] if at >= 0 else question).strip()
    answer, gold = _answer_and_gold(completion, d)
    if not question or answer is None or not d.min_answer_words <= len(answer.split()) <= d.max_answer_words:
        return None
    context = cap_context(prompt[:q].rstrip(), d.max_context_chars, d.document_marker)
    if answer.lower() in context.lower():
        support = "answer"
    elif gold is not None and f"{d.document_marker}{gold}]" in context:
        support = "gold"
    else:
        support = "none"
    return TextExample(row_id, context, question, answer, support != "none", support)


def _split_text(text: str, d: DataConfig) -> tuple[str, str]:
    """(prompt, completion) of a row given as one text: split at the first answer marker after the
    question (the trailer's "Long Answer:" contains the marker too)."""
    q = text.rfind(d.question_marker)
    a = text.find(d.answer_marker, max(q, 0))
    return (text, "") if q < 0 or a < 0 else (text[:a], text[a:])


def _answer_and_gold(completion: str, d: DataConfig) -> tuple[str | None, str | None]:
    """(short answer, gold document number) of a completion: the answer runs from the answer
    marker to the long answer or the gold marker, whichever comes first."""
    a = completion.find(d.answer_marker)
    if a < 0:
        return None, None
    rest = completion[a + len(d.answer_marker):]
    ends = [i for i in (rest.find(d.long_answer_marker), rest.find(d.gold_marker)) if i >= 0]
    answer = re.sub(d.trailer_pattern, "", rest[:min(ends)] if ends else rest).strip()
    gold = re.search(re.escape(d.gold_marker) + r"\s*(\d+)", completion)
    return answer, gold.group(1) if gold else None


def cap_context(context: str, limit: int, marker: str) -> str:
    """`context` within `limit` characters, cut before the last document that would cross it."""
    if len(context) <= limit:
        return context
    cut = context.rfind(marker, 0, limit)
    return context[:cut].rstrip() if cut > 0 else context[:limit]


def read_rows(path: Path, d: DataConfig) -> Iterator[tuple[str, dict]]:
    """(row id, row) of every row of a .jsonl / .json / .parquet file, or of a folder's files
    (sorted by name, so the pool's order, and the shuffle, do not depend on the file system)."""
    files = sorted(p for p in path.rglob("*") if p.suffix in DATA_SUFFIXES) if path.is_dir() else [path]
    if not files:
        raise ConfigError(f"recipe.data_path={path}: no {', '.join(DATA_SUFFIXES)} file there")
    for f in files:
        for i, row in enumerate(_rows(f)):
            columns = isinstance(row, dict) and all(isinstance(row.get(c), str) for c in (d.prompt_field, d.completion_field))
            if not columns and not (isinstance(row, dict) and isinstance(row.get(d.text_field), str)):
                raise ConfigError(f"recipe.data_path: {f} row {i} has neither {d.prompt_field!r} and "
                                  f"{d.completion_field!r} nor a text field {d.text_field!r} (recipe.data.*_field name them)")
            yield f"{f.name}:{i}", row


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


def nq_draw(d: DataConfig, data_path: str | None) -> PoolDraw:
    """The pool of NQ examples, the drawn training examples and the held-out diagnostic set."""
    path = Path(data_path).expanduser() if data_path else hub_files(d)
    if not path.exists():
        raise ConfigError(f"recipe.data_path={data_path}: no such file or directory")
    pool = [ex for row_id, row in read_rows(path, d) if (ex := parse_nq(row, d, row_id))]
    if not pool:
        raise ConfigError(f"recipe.data_path={path}: no row holds an NQ example ({d.document_marker!r} ... "
                          f"{d.question_marker!r} in {d.prompt_field!r}, {d.answer_marker!r} in {d.completion_field!r})")
    shuffled = list(pool)
    random.Random(d.shuffle_seed).shuffle(shuffled)
    drawn = shuffled[:d.examples]
    heldout = [e for e in shuffled[d.examples:] if not e.answerable][:d.heldout]
    return PoolDraw(pool, drawn, heldout)


def nq_examples(d: DataConfig, data_path: str | None) -> list[TextExample]:
    return nq_draw(d, data_path).drawn


def ruler_examples(d: DataConfig, tokenizer) -> list[TextExample]:
    from memexp.benchmarks.ruler.benchmark import Ruler
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


def draw(d: DataConfig, data_path: str | None, tokenizer) -> PoolDraw:
    """The recipe's texts: NQ's pool and draw, or the RULER examples (all answerable, nothing held out)."""
    if d.source == "nq":
        return nq_draw(d, data_path)
    texts = ruler_examples(d, tokenizer)
    return PoolDraw(texts, texts, [])


def train_examples(d: DataConfig, data_path: str | None, tokenizer) -> list[TrainExample]:
    return [tokenize(t, d, tokenizer) for t in draw(d, data_path, tokenizer).drawn]


def tokenize(t: TextExample, d: DataConfig, tokenizer) -> TrainExample:
    prompt = d.question_template.format(question=t.question)
    target = tokenizer.encode(d.answer_template.format(answer=t.answer))[:d.max_target_tokens] + [tokenizer.eos_id]
    question = Question(id=t.id, prompt=prompt, references=[t.answer], metric="string_match_all",
                        max_new_tokens=len(target))
    return TrainExample(t, tokenizer.encode(d.context_template.format(context=t.context), add_bos=True),
                        tokenizer.encode(prompt), target, question)
