"""Data and a tokenizer the RULER tests build their inputs from (no downloads)."""

from __future__ import annotations

from memexp.backbones.base import Tokenizer

# Stands in for the Paul Graham essays: plain prose with abbreviations, a question and
# an exclamation, so sentence splitting has something to decide.
ESSAY = """Most good ideas look bad at first. That is why they are still available.
When Dr. Lee started her lab in 1998, nobody wanted to fund it.   She kept going anyway.
Was she right? Looking back, e.g. at the patents, it is hard to argue otherwise.
The U.S. market took ten years to notice. Startups work the same way!

A founder has to be stubborn about the vision and flexible about the details.
Users rarely say what they want; they show it by what they do. Watch them closely.
Small teams move faster because they talk less and build more. Meetings are a tax.
The best way to learn a field is to try to make something new in it. Reading helps too.
"""


class ByteTokenizer(Tokenizer):
    """One token per UTF-8 byte, BOS 256, EOS 257."""

    bos_id = 256
    eos_id = 257

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [self.bos_id, *ids] if add_bos else ids

    def decode(self, ids) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


SQUAD = {
    "version": "v2.0",
    "data": [
        {
            "title": "Rivers",
            "paragraphs": [
                {
                    "context": "The Nile flows north into the Mediterranean.",
                    "qas": [
                        {"question": "Where does the Nile flow?", "id": "a1", "is_impossible": False,
                         "answers": [{"text": "north", "answer_start": 15}, {"text": "into the Mediterranean", "answer_start": 21}]},
                        {"question": "Who owns the Nile?", "id": "a2", "is_impossible": True, "answers": [],
                         "plausible_answers": [{"text": "Egypt", "answer_start": 0}]},
                    ],
                },
                {
                    "context": "The Amazon carries more water than any other river.",
                    "qas": [
                        {"question": "Which river carries the most water?", "id": "a3", "is_impossible": False,
                         "answers": [{"text": "The Amazon", "answer_start": 0}]},
                    ],
                },
            ],
        },
        {
            "title": "Mountains",
            "paragraphs": [
                {
                    "context": "Everest is the highest mountain above sea level.",
                    "qas": [
                        {"question": "What is the highest mountain?", "id": "b1", "is_impossible": False,
                         "answers": [{"text": "Everest", "answer_start": 0}]},
                    ],
                },
                {"context": "K2 is harder to climb than Everest.", "qas": []},
                {"context": "The Alps span eight countries.", "qas": []},
            ],
        },
    ],
}


def hotpotqa_rows() -> list[dict]:
    """Two questions, each with ten two-sentence paragraphs (HotpotQA's distractor setting)."""
    rows = []
    for q, (question, answer) in enumerate([("Which city hosts the tower?", "Paris"), ("Who wrote the play?", "Ibsen")]):
        context = [[f"Page {q}{p}", [f"Fact {q}{p} one. ", f"Fact {q}{p} two."]] for p in range(10)]
        rows.append({"_id": f"h{q}", "question": question, "answer": answer, "context": context,
                     "supporting_facts": [[f"Page {q}0", 0]], "type": "bridge", "level": "easy"})
    return rows
