"""LongHealth (kbressem/LongHealth, data/benchmark_v5.json): multiple-choice QA over a
patient's discharge letters.

The official repository is not in memexp's reference store. What is known comes from
third-party copies of its code (see specs/benchmarks.md section 6) and is used verbatim:
the system prompt, the user prompt template, documents joined by "\\n\\n--------------\\n\\n",
options "A: ..." to "E: ..." (tasks 2 and 3 add "F: Question cannot be answered with
provided documents"), the gold letter (the first option containing `correct`; "F" in task
3), the answer parser ('The correct answer is X:') and 50 new tokens.

Reconstructed, because memexp reads one context for many questions:
- task 1 (the patient's own letters; the Titan-Llama paper's 400 questions, one pass):
  one example per patient with all 20 questions and the letters in one seeded shuffled
  order, where the official script reshuffles (and re-selects under its token budget,
  answer letters first) for every question and asks each five times;
- tasks 2 and 3 (answer letters + `num_distractors` letters of other patients / the
  distractors alone): one example per question and task, sampled with the seed, where the
  official script alternates ten such samples per question;
- with `max_length`, letters are taken in context order until the budget is spent and the
  one that overflows is cut by tokens, as the official selection cuts its last letter.
The system prompt goes to Example.system for methods that apply a chat template.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator

from memexp.backbones.base import Tokenizer
from memexp.benchmarks import datasets as data
from memexp.benchmarks.base import Benchmark, Example, Question
from memexp.benchmarks.metrics import longhealth_choice
from memexp.config import LongHealthConfig

NAME = "longhealth"
LOCAL = "/path/benchmark_v5.json"  # what bench.data_path names
FILE = "benchmark_v5.json"

SYSTEM_PROMPT = (
    "\nYou are a highly skilled and detail-oriented assistant, specifically trained to assist medical "
    "professionals in interpreting and extracting key information from medical documents. Your primary "
    "responsibility will be to analyze discharge letters from hospitals. When you receive one or more of these "
    "letters, you will be expected to carefully review the contents and accurately answer multiple-choice "
    "questions related to these documents. \n\nYour answers should be:\n1. Accurate: Make sure your answers are "
    "based on the information provided in the letters.\n2. Concise: Provide brief and direct answers without "
    "unnecessary elaboration.\n3. Contextual: Consider the context and specifics of each question to provide the "
    "most relevant information.\n\nRemember, your job is to streamline the physician's decision-making process by "
    "providing them with accurate and relevant information from discharge summaries. Efficiency and reliability "
    "are key.\n"
)
DOCUMENTS_HEAD = "\n--------------BEGIN DOCUMENTS--------------\n\n"
DOCUMENTS_TAIL = "\n\n--------------END DOCUMENTS--------------\n\n"
SEPARATOR = "\n\n--------------\n\n"
INSTRUCTIONS = (
    "\n\nPlease answer using the following format:\n1. Begin your answer with the phrase \"The correct answer is\".\n"
    "2. State the letter of the correct option (e.g., A, B, C, D, E).\n3. Follow the letter with a colon and the "
    "exact text of the option you chose.\n4. Make sure your answer is a single, concise sentence.\n\nFor example, "
    "if the correct answer to a question is option C, and the text for C is 'Acute Bronchitis', your answer should "
    "be: \n'The correct answer is C: Acute bronchitis.'\n"
)
UNANSWERABLE = "Question cannot be answered with provided documents"
QUESTION_FIELDS = {"question": str, "correct": str, "answer_location": dict,
                   **{f"answer_{label}": str for label in "abcde"}}


def render_prompt(question: dict, labels: str) -> str:
    """The user prompt after the documents: question, options, answer format."""
    options = "\n".join(f"{label.upper()}: {_option(question, label)}" for label in labels)
    return f"{question['question']}\n{options}{INSTRUCTIONS}"


def render_context(documents: list[str]) -> str:
    return DOCUMENTS_HEAD + SEPARATOR.join(documents) + DOCUMENTS_TAIL


def gold_letter(question: dict) -> str | None:
    """get_correct_answer: the first option (a..e) whose text contains `correct`."""
    for label in "abcde":
        if question["correct"] in question[f"answer_{label}"]:
            return label.upper()
    return None


def _option(question: dict, label: str) -> str:
    return UNANSWERABLE if label == "f" else question[f"answer_{label}"]


class LongHealth(Benchmark):
    name = NAME

    def __init__(self, cfg: LongHealthConfig | None = None) -> None:
        self.cfg = cfg or LongHealthConfig()

    def examples(self, tokenizer: Tokenizer) -> Iterator[Example]:
        root = data.resolve(NAME, self.cfg.data_path, self.cfg.cache_dir, lambda d: fetch(self.cfg.url, d),
                            LOCAL)
        path = root / FILE if root.is_dir() else root
        patients = self.patients(path)
        for task in self.cfg.tasks:
            for pid, patient in patients[: self.cfg.num_samples]:
                if task == "task1":
                    yield self.own_letters(pid, patient, tokenizer)
                else:
                    for i, q in patient["questions"]:
                        yield self.with_distractors(task, pid, patient, i, q, patients, tokenizer)

    def patients(self, path: Path) -> list[tuple[str, dict]]:
        """(patient id, {"texts": {id: text}, "questions": [(index, question)]}) for every
        usable patient; malformed patients and questions are reported and skipped."""
        rows = data.read_rows(path)
        if len(rows) != 1 or not isinstance(rows[0].data, dict):
            raise data.BenchmarkDataError(f"bench={NAME}: {path} should hold one JSON object of patients")
        out = []
        for n, (pid, patient) in enumerate(rows[0].data.items()):
            row = data.SourceRow(str(path), n, patient)
            problem = data.row_problem(patient, {"texts": dict, "questions": list}, nonempty=("texts", "questions"))
            if problem is None and not all(isinstance(t, str) for t in patient["texts"].values()):
                problem = "texts should map text ids to strings"
            if problem:
                data.report(row, f"patient {pid!r}: {problem}")
                continue
            questions = []
            for i, q in enumerate(patient["questions"]):
                problem = data.row_problem(q, QUESTION_FIELDS) or _location_problem(q, patient["texts"])
                if problem:
                    data.report(row, f"patient {pid!r} question {i}: {problem}")
                else:
                    questions.append((i, q))
            if questions:
                out.append((pid, {"texts": patient["texts"], "questions": questions}))
        return data.require_rows(out, NAME, str(path))

    def own_letters(self, pid: str, patient: dict, tokenizer: Tokenizer) -> Example:
        documents = list(patient["texts"].values())
        random.Random(f"{self.cfg.seed}/task1/{pid}").shuffle(documents)
        questions = [self.question(str(i), q, "abcde", gold_letter(q)) for i, q in patient["questions"]]
        return self.example(f"task1/{pid}", "task1", documents, questions, tokenizer)

    def with_distractors(self, task: str, pid: str, patient: dict, i: int, q: dict,
                         patients: list[tuple[str, dict]], tokenizer: Tokenizer) -> Example:
        rng = random.Random(f"{self.cfg.seed}/{task}/{pid}/{i}")
        others = [text for other, p in patients if other != pid for text in p["texts"].values()]
        documents = rng.sample(others, min(self.cfg.num_distractors, len(others)))
        if task == "task2":
            documents += [patient["texts"][tid] for tid in q["answer_location"]]
        rng.shuffle(documents)
        gold = gold_letter(q) if task == "task2" else "F"
        return self.example(f"{task}/{pid}/{i}", task, documents, [self.question("0", q, "abcdef", gold)], tokenizer)

    def question(self, qid: str, q: dict, labels: str, gold: str | None) -> Question:
        return Question(id=qid, prompt=render_prompt(q, labels), references=[gold or ""], metric="accuracy",
                        max_new_tokens=self.cfg.max_new_tokens)

    def example(self, eid: str, task: str, documents: list[str], questions: list[Question],
                tokenizer: Tokenizer) -> Example:
        if self.cfg.max_length is not None:
            longest = max(len(tokenizer.encode(q.prompt)) for q in questions)
            documents = within_budget(documents, self.cfg.max_length - longest, tokenizer)
        return Example(id=eid, task=task, length="all", context=render_context(documents), questions=questions,
                       meta={"documents": len(documents)}, system=SYSTEM_PROMPT)

    def score(self, prediction: str, question: Question) -> float:
        return 100.0 * float(longhealth_choice(prediction) == question.references[0])


def within_budget(documents: list[str], budget: int, tokenizer: Tokenizer) -> list[str]:
    """The documents, in order, whose context fits `budget` tokens (BOS included); the one
    that overflows is cut to what is left, the rest dropped."""
    used = len(tokenizer.encode(DOCUMENTS_HEAD + DOCUMENTS_TAIL, add_bos=True))
    separator = len(tokenizer.encode(SEPARATOR))
    kept = []
    for doc in documents:
        ids = tokenizer.encode(doc)
        cost = len(ids) + (separator if kept else 0)
        if used + cost <= budget:
            kept.append(doc)
            used += cost
            continue
        room = budget - used - (separator if kept else 0)
        if room > 0:
            kept.append(tokenizer.decode(ids[:room]))
        break
    return kept


def _location_problem(q: dict, texts: dict) -> str | None:
    unknown = [tid for tid in q["answer_location"] if tid not in texts]
    if unknown:
        return f"answer_location names unknown texts {unknown}"
    if gold_letter(q) is None:
        return "no option contains the 'correct' text"
    return None


def fetch(url: str, dest: Path) -> None:
    data.web_file(url, dest / FILE)


def download(cfg: LongHealthConfig) -> Path:
    return data.ensure_cached(NAME, cfg.cache_dir, lambda d: fetch(cfg.url, d), LOCAL)
