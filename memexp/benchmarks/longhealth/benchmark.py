"""LongHealth (kbressem/LongHealth, data/benchmark_v5.json): multiple-choice QA over a
patient's discharge letters.

The official repository is not in memexp's reference store. What is known comes from
third-party copies of its code (see specs/benchmarks.md section 6) and is used verbatim:
the system prompt, the user prompt template, documents joined by "\\n\\n--------------\\n\\n",
options "A: ..." to "E: ..." (tasks 2 and 3 add "F: Question cannot be answered with
provided documents"), the gold letter (the first option containing `correct`; "F" in task
3), the answer parser ('The correct answer is X:') and 50 new tokens.

Two protocols (`bench.protocol`):
- greedy (default), what the Titan-Llama paper reports: one answer per question (its
  54.25 +- 2.49 for full attention is the standard error of 400 single answers). Task 1:
  one example per patient with all 20 questions and its letters in one seeded shuffled
  order; tasks 2 and 3 (answer letters + `num_distractors` letters of other patients / the
  distractors alone): one example per question and task, sampled with the seed.
- official, the script's: task 1 asks every question 5 times, its letters reshuffled (and
  re-selected, answer letters first) each time; tasks 2 and 3 ask it 5 times each (the
  script's 10 alternating iterations), with fresh distractors each time. One example per
  question and pass, so each pass reads its own context; decoding stays greedy (the
  script samples with vLLM's defaults).
With `max_length`, letters are selected as the official create_prompt selects them: the
answer letters first (task 1 greedy: those of every question of the patient), then the
others, the one that overflows cut by tokens; the selection is then shuffled, so a cut
never drops an answer letter that fits.
The system prompt goes to Example.system for methods that apply a chat template.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator

from memexp.backbones.base import Tokenizer
from memexp.benchmarks import datasets as data
from memexp.benchmarks.base import Benchmark
from memexp.benchmarks.longhealth.config import LongHealthConfig
from memexp.benchmarks.metrics import longhealth_choice
from memexp.core.types import Example, Question

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
OFFICIAL_PASSES = 5  # the script's answers per question: task 1, and each of tasks 2 and 3
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
        passes = range(OFFICIAL_PASSES) if self.cfg.protocol == "official" else [None]
        for task in self.cfg.tasks:
            for pid, patient in patients[: self.cfg.num_samples]:
                if task == "task1" and self.cfg.protocol == "greedy":
                    yield self.own_letters(pid, patient, tokenizer)
                    continue
                for i, q in patient["questions"]:
                    for j in passes:
                        if task == "task1":
                            yield self.own_letters_for(pid, patient, i, q, j, tokenizer)
                        else:
                            yield self.with_distractors(task, pid, patient, i, q, patients, tokenizer, j)

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
        """Greedy task 1: all the patient's questions on one context."""
        questions = [self.question(str(i), q, "abcde", gold_letter(q)) for i, q in patient["questions"]]
        answers = {tid for _, q in patient["questions"] for tid in q["answer_location"]}
        rng = random.Random(f"{self.cfg.seed}/task1/{pid}")
        documents = self.select(patient["texts"], answers, questions, tokenizer, rng)
        return self.example(f"task1/{pid}", "task1", documents, questions)

    def own_letters_for(self, pid: str, patient: dict, i: int, q: dict, j: int, tokenizer: Tokenizer) -> Example:
        """Official task 1, pass `j` of question `i`: the answer letters, then the others."""
        texts = patient["texts"]
        ordered = {tid: texts[tid] for tid in q["answer_location"]} | texts
        questions = [self.question("0", q, "abcde", gold_letter(q))]
        rng = random.Random(f"{self.cfg.seed}/task1/{pid}/{i}/{j}")
        documents = self.select(ordered, set(q["answer_location"]), questions, tokenizer, rng)
        return self.example(f"task1/{pid}/{i}/{j}", "task1", documents, questions)

    def with_distractors(self, task: str, pid: str, patient: dict, i: int, q: dict,
                         patients: list[tuple[str, dict]], tokenizer: Tokenizer, j: int | None = None) -> Example:
        """Tasks 2 and 3 for question `i` (pass `j` under the official protocol)."""
        key = f"{self.cfg.seed}/{task}/{pid}/{i}" + ("" if j is None else f"/{j}")
        rng = random.Random(key)
        others = [text for other, p in patients if other != pid for text in p["texts"].values()]
        sampled = rng.sample(others, min(self.cfg.num_distractors, len(others)))
        candidates = {f"distractor_{n}": text for n, text in enumerate(sampled)}
        answers = set()
        if task == "task2":
            candidates |= {tid: patient["texts"][tid] for tid in q["answer_location"]}
            answers = set(q["answer_location"])
        gold = gold_letter(q) if task == "task2" else "F"
        questions = [self.question("0", q, "abcdef", gold)]
        documents = self.select(candidates, answers, questions, tokenizer, rng)
        eid = f"{task}/{pid}/{i}" + ("" if j is None else f"/{j}")
        return self.example(eid, task, documents, questions)

    def select(self, candidates: dict[str, str], answers: set[str], questions: list[Question],
               tokenizer: Tokenizer, rng: random.Random) -> list[str]:
        """The letters of the context: within `max_length` (answer letters chosen first, see
        the module docstring), in candidate order, then shuffled with `rng`."""
        chosen = dict(candidates)
        if self.cfg.max_length is not None:
            longest = max(len(tokenizer.encode(q.prompt)) for q in questions)
            first = [tid for tid in candidates if tid in answers] + [tid for tid in candidates if tid not in answers]
            kept = within_budget([candidates[tid] for tid in first], self.cfg.max_length - longest, tokenizer)
            chosen = dict(zip(first, kept))
        documents = [chosen[tid] for tid in candidates if tid in chosen]
        rng.shuffle(documents)
        return documents

    def question(self, qid: str, q: dict, labels: str, gold: str | None) -> Question:
        return Question(id=qid, prompt=render_prompt(q, labels), references=[gold or ""], metric="accuracy",
                        max_new_tokens=self.cfg.max_new_tokens)

    def example(self, eid: str, task: str, documents: list[str], questions: list[Question]) -> Example:
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
