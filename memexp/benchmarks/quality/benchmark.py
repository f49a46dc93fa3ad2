"""QuALITY (nyu-mll/quality, v1.0.1 HTML-stripped files): multiple-choice QA over a story.

The Titan-Llama paper reports accuracy on QuALITY (43.34 +- 1.08 for full attention: the
standard error of ~2,086 questions, i.e. the whole dev split) without giving its prompt or
answer extraction. Reconstructed here, and only here: the prompt is ZeroSCROLLS' QuALITY
prompt for base models (instruction and story first, then "Question and Possible Answers"
with the choices as "\\n (A) ...", then "Answer:"; ZeroSCROLLS paper Table 6), generation is 10 tokens as in ZeroSCROLLS, and the predicted letter is the
leading A-D of the output or the letter after "answer is". The HARD subset
(`difficult` = 1) is reported beside overall accuracy, as the QuALITY README asks.

`bench.prompt=titan_sft` is the format the Titan-Llama authors fine-tuned their modules in
(sarahpannn/titans-pytorch at c60b4efa, sft_kvwrite_quality_mc.py, QualityMCSFTDataset._build):
the article as it is, a blank line, "Question: {question}\nChoices:\n" with one "A. {option
stripped}" line per option, then "Answer:"; tokenized without special tokens (no BOS) and no chat
template; the trained target is the single token " X" of the gold letter
(`tokenizer.encode(f" {letter}", add_special_tokens=False)`, which must be one token). The authors
release no QuALITY evaluation; their accuracy at the answer position is `predictions ==
shift_labels` with `predictions = torch.argmax(shift_logits, dim=-1)` over the whole vocabulary
(titan_llama.py at c60b4efa, TitanLLaMAForCausalLM.forward, the `correct` it returns), so an
answer counts only when the argmax token is that label id. memexp scores the same: one greedy
token (max_new_tokens=1, the only value allowed), correct when its text is exactly " X": the label
token's text, leading space included. "B" without the space is another token and is wrong, as are
" Both" and " B." (a different token or more than one). On a tokenizer where " X" is not one
token (a byte tokenizer) no answer can be correct, as the authors' data code refuses such a
tokenizer. The paper says only "multiple-choice accuracy"; the highest-likelihood letter among
A-D (a restricted argmax, never lower) is not what their code measures and is not offered. The authors' prompts longer than the training
length lose their head (the last 16,383 tokens are kept); memexp's max_length stays a middle
truncation, off by default, and QuALITY's articles fit 16K.

The two question sets written for the same article share one example, so the story is read
once for all its questions.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import ascii_uppercase
from typing import Iterator

from memexp.backbones.base import Tokenizer
from memexp.benchmarks import datasets as data
from memexp.benchmarks.base import Benchmark
from memexp.benchmarks.quality.config import QualityConfig
from memexp.benchmarks.truncation import longbench_ends, middle_truncate
from memexp.core.types import Example, Question, Record

NAME = "quality"
LETTERS = "ABCD"
INSTRUCTION = (
    "You are provided a story and a multiple-choice question with 4 possible answers (marked by A, B, C, D). "
    "Choose the best answer by writing its corresponding letter (either A, B, C, or D)."
)
ROW_FIELDS = {"article_id": str, "set_unique_id": str, "article": str, "questions": list}
QUESTION_FIELDS = {"question": str, "options": list, "gold_label": int}

_LEADING = re.compile(r"\(?([A-D])(?:\)|\.|:|,|\s|$)")
_STATED = re.compile(r"answer is:?\s*\(?([A-D])\b")


def file_name(split: str) -> str:
    return f"QuALITY.v1.0.1.htmlstripped.{split}"


def local_path(split: str) -> str:
    """What bench.data_path names for `split`."""
    return f"/path/{file_name(split)}"


def quality_choice(prediction: str) -> str | None:
    """The letter a generated answer picks: a leading 'B', '(B)', 'B.' or 'B: ...', else
    the letter after 'answer is'; None when there is none (reconstructed, see above)."""
    text = prediction.strip()
    match = _LEADING.match(text) or _STATED.search(text)
    return match.group(1) if match else None


def render_context(article: str) -> str:
    return f"{INSTRUCTION}\n\nStory:\n{article.strip()}\n\n"


def render_prompt(question: str, options: list[str]) -> str:
    r"""ZeroSCROLLS' {QUESTION_AND_OPTIONS} is SCROLLS' QuALITY query: the question, a blank
    line, then each choice on its own line as " (A) ..." (the layout lm-eval's SCROLLS parser
    reads back: question up to the first blank line, choices split on r" *\([A-D]\) *")."""
    choices = "\n".join(f" ({letter}) {option.strip()}" for letter, option in zip(LETTERS, options))
    return f"Question and Possible Answers:\n{question.strip()}\n\n{choices}\n\nAnswer:"


def titan_sft_context(article: str) -> str:
    """The authors' SFT prompt up to the question: `{article}\n\n` (the blank line stays with the
    article, so splitting there never changes how a BPE tokenizer cuts the whitespace)."""
    return f"{article}\n\n"


def titan_sft_prompt(question: str, options: list[str]) -> str:
    """The authors' SFT query: `Question: {q}\nChoices:\nA. ...\nAnswer:`, options stripped,
    the question as written, options lettered A-Z (their OPTION_LABELS). Also what
    recipe=titan_llama's quality_sft stage trains on."""
    choices = "\n".join(f"{letter}. {option.strip()}" for letter, option in zip(ascii_uppercase, options))
    return f"Question: {question}\nChoices:\n{choices}\nAnswer:"


def titan_sft_choice(prediction: str) -> str | None:
    """The letter whose trained target " X" the one generated token is, exactly; else None (see above)."""
    return prediction[1] if len(prediction) == 2 and prediction[0] == " " and prediction[1] in LETTERS else None


class Quality(Benchmark):
    name = NAME

    def __init__(self, cfg: QualityConfig | None = None) -> None:
        self.cfg = cfg or QualityConfig()
        self._hard: set[tuple[str, str]] = set()

    def examples(self, tokenizer: Tokenizer) -> Iterator[Example]:
        root = data.resolve(NAME, self.cfg.data_path, self.cfg.cache_dir, lambda d: fetch(self.cfg.url, d),
                            local_path(self.cfg.split))
        path = root / file_name(self.cfg.split) if root.is_dir() else root
        if not path.is_file():
            raise data.BenchmarkDataError(f"bench={NAME}: {path} not found; {data.fix_hint(NAME, local_path(self.cfg.split))}")
        rows = data.valid_rows(data.read_rows(path), ROW_FIELDS, nonempty=("article",))
        articles: dict[str, list[data.SourceRow]] = {}
        for row in data.require_rows(rows, NAME, str(path)):
            articles.setdefault(row.data["article_id"], []).append(row)
        for article_id, group in list(articles.items())[: self.cfg.num_samples]:
            example = self.example(article_id, group, tokenizer)
            if example.questions:
                yield example

    def example(self, article_id: str, rows: list[data.SourceRow], tokenizer: Tokenizer) -> Example:
        questions = []
        titan = self.cfg.prompt == "titan_sft"
        render = titan_sft_prompt if titan else render_prompt
        for row in rows:
            for j, q in enumerate(row.data["questions"]):
                problem = _question_problem(q)
                if problem:
                    data.report(row, f"question {j}: {problem}")
                    continue
                qid = f"{row.data['set_unique_id']}/{j}"
                hard = bool(q.get("difficult"))
                if hard:
                    self._hard.add((article_id, qid))
                questions.append(Question(
                    id=qid, prompt=render(q["question"], q["options"]), references=[LETTERS[q["gold_label"] - 1]],
                    metric="accuracy", max_new_tokens=self.cfg.max_new_tokens, meta={"hard": hard},
                    chat_template=not titan))
        article = rows[0].data["article"]
        context = titan_sft_context(article) if titan else render_context(article)
        if self.cfg.max_length is not None and questions:
            longest = max(len(tokenizer.encode(q.prompt)) for q in questions)
            context = middle_truncate(tokenizer, context, longest, self.cfg.max_length,
                                      longbench_ends(self.cfg.max_length))
        return Example(id=article_id, task=NAME, length=self.cfg.split, context=context, questions=questions,
                       meta={"title": rows[0].data.get("title")}, bos=not titan)

    def score(self, prediction: str, question: Question) -> float:
        choice = titan_sft_choice if self.cfg.prompt == "titan_sft" else quality_choice
        return 100.0 * float(choice(prediction) == question.references[0])

    def aggregate(self, records: list[Record]) -> dict[str, float]:
        overall = [r.score for r in records]
        hard = [r.score for r in records if r.key in self._hard]
        out = {"accuracy": round(sum(overall) / len(overall), 2)} if overall else {}
        if hard:
            out["hard"] = round(sum(hard) / len(hard), 2)
        return out


def _question_problem(q) -> str | None:
    problem = data.row_problem(q, QUESTION_FIELDS)
    if problem:
        return problem
    if len(q["options"]) != 4 or not all(isinstance(o, str) for o in q["options"]):
        return "options should be 4 strings"
    if not 1 <= q["gold_label"] <= 4:
        return f"gold_label {q['gold_label']} is not in 1..4"
    return None


def fetch(url: str, dest: Path) -> None:
    for split in ("dev", "train"):
        data.web_file(url + file_name(split), dest / file_name(split))


def download(cfg: QualityConfig) -> Path:
    return data.ensure_cached(NAME, cfg.cache_dir, lambda d: fetch(cfg.url, d), local_path(cfg.split))
