"""RULER's prompt templates, answer prefixes and generation budgets.

Text as in NVIDIA/RULER scripts/data/synthetic/constants.py (the 'base' model template,
which adds nothing around the task text). RULER formats `template + answer_prefix` as one
string; memexp cuts it at `{context}`: everything up to and including the haystack is the
example's context, the rest is the question prompt (see `split_prompt`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskTemplate:
    template: str
    answer_prefix: str
    tokens_to_generate: int

    @property
    def full(self) -> str:
        return self.template + self.answer_prefix


NIAH = TaskTemplate(
    template=(
        "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. "
        "I will quiz you about the {type_needle_v} afterwards.\n{context}\n"
        "What are all the special magic {type_needle_v} for {query} mentioned in the provided text?"
    ),
    answer_prefix=" The special magic {type_needle_v} for {query} mentioned in the provided text are",
    tokens_to_generate=128,
)

VARIABLE_TRACKING = TaskTemplate(
    template=(
        "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
        "Question: Find all variables that are assigned the value {query} in the text above."
    ),
    answer_prefix=(
        " Answer: According to the chain(s) of variable assignment in the text above, "
        "{num_v} variables are assigned the value {query}, they are: "
    ),
    tokens_to_generate=30,
)

COMMON_WORDS = TaskTemplate(
    template=(
        "Below is a numbered list of words. In these words, some appear more often than others. "
        "Memorize the ones that appear most often.\n{context}\n"
        "Question: What are the 10 most common words in the above list?"
    ),
    answer_prefix=" Answer: The top 10 words that appear most often in the list are:",
    tokens_to_generate=120,
)

FREQ_WORDS = TaskTemplate(
    template=(
        "Read the following coded text and track the frequency of each coded word. "
        "Find the three most frequently appeared coded words. {context}\n"
        "Question: Do not provide any explanation. Please ignore the dots '....'. "
        "What are the three most frequently appeared words in the above coded text?"
    ),
    answer_prefix=" Answer: According to the coded text above, the three most frequently appeared words are:",
    tokens_to_generate=50,
)

QA = TaskTemplate(
    template=(
        "Answer the question based on the given documents. Only give me the answer and do not output any other words."
        "\n\nThe following are given documents.\n\n{context}\n\n"
        "Answer the question based on the given documents. Only give me the answer and do not output any other words."
        "\n\nQuestion: {query}"
    ),
    answer_prefix=" Answer:",
    tokens_to_generate=32,
)

NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
DOCUMENT = "Document {i}:\n{document}"

CONTEXT_FIELD = "{context}"


def split_prompt(full_template: str, **fields) -> tuple[str, str]:
    """(text before the haystack, text after it) of a filled template.

    Each side is formatted on its own, so the haystack itself is never parsed as a
    format string: the result equals RULER's `full_template.format(context=haystack, ...)`.
    """
    head, tail = full_template.split(CONTEXT_FIELD)
    return head.format(**fields), tail.format(**fields)


def singular(full_template: str) -> str:
    """RULER's wording for one query with one value (niah.py: "A ... is", "number")."""
    return (
        full_template.replace("Some", "A")
        .replace("are all", "is")
        .replace("are", "is")
        .replace("answers", "answer")
    )
