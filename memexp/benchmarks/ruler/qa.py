"""Question answering over many documents (qa_1: SQuAD v2, qa_2: HotpotQA), as
NVIDIA/RULER scripts/data/synthetic/qa.py generates it: example i asks question i, its
gold paragraphs hidden among distractors, all numbered "Document k:" in shuffled order."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from memexp.benchmarks.ruler.sample import Sample
from memexp.benchmarks.ruler.templates import DOCUMENT, QA, split_prompt


@dataclass
class QaItem:
    query: str
    outputs: list[str]
    context: list[int]  # indices of the gold documents
    more_context: list[int] = field(default_factory=list)  # preferred distractors: same article


@dataclass
class QaData:
    items: list[QaItem]
    docs: list[str]


def read_squad(data: dict) -> QaData:
    """RULER's read_squad: answerable questions only; every paragraph is a document."""
    docs = sorted({p["context"] for d in data["data"] for p in d["paragraphs"]})
    doc_index = {c: i for i, c in enumerate(docs)}
    items = []
    for article in data["data"]:
        article_docs = [doc_index[p["context"]] for p in article["paragraphs"]]
        for paragraph in article["paragraphs"]:
            gold = doc_index[paragraph["context"]]
            for qa in paragraph["qas"]:
                if not qa["is_impossible"]:
                    items.append(
                        QaItem(
                            query=qa["question"],
                            outputs=[a["text"] for a in qa["answers"]],
                            context=[gold],
                            more_context=[i for i in article_docs if i != gold],
                        )
                    )
    return QaData(items, docs)


def read_hotpotqa(data: list) -> QaData:
    """RULER's read_hotpotqa: a document is "title\\n" + the paragraph's sentences; all ten
    paragraphs of a question (gold and distractors) count as its context."""

    def document(title: str, sentences: list[str]) -> str:
        return f"{title}\n{''.join(sentences)}"

    docs = sorted({document(t, p) for d in data for t, p in d["context"]})
    doc_index = {c: i for i, c in enumerate(docs)}
    items = [
        QaItem(
            query=d["question"],
            outputs=[d["answer"]],
            context=[doc_index[document(t, p)] for t, p in d["context"]],
        )
        for d in data
    ]
    return QaData(items, docs)


class QaGenerator:
    def __init__(self, task: str, data: QaData, seed: int) -> None:
        self.task, self.data, self.seed = task, data, seed
        self.incremental = 10
        # every gold document must fit (RULER starts its search at 10 documents)
        self.min_size = max(len(item.context) for item in data.items)
        self.max_size = None

    def build(self, index: int, size: int, rng: random.Random) -> Sample:
        items, docs = self.data.items, self.data.docs
        if index >= len(items):
            raise ValueError(f"{self.task} has {len(items)} questions: bench.num_samples must not exceed it")
        item = items[index]
        if size < len(docs):
            gold, more = item.context, item.more_context
            if size - len(gold) > len(more):
                taken = set(gold + more)
                others = [i for i in range(len(docs)) if i not in taken]
                chosen = gold + more + rng.sample(others, max(0, size - len(gold) - len(more)))
            else:
                chosen = gold + rng.sample(more, size - len(gold))
        else:
            repeats = -(-size // len(docs))
            chosen = (list(range(len(docs))) * repeats)[:size]
        random.Random(self.seed).shuffle(chosen)
        context = "\n\n".join(DOCUMENT.format(i=i + 1, document=docs[d]) for i, d in enumerate(chosen))
        head, prompt = split_prompt(QA.full, query=item.query)
        gold_set = set(item.context)
        meta = {
            "size": size,
            "question": item.query,
            "gold_documents": [i + 1 for i, d in enumerate(chosen) if d in gold_set],
        }
        return Sample(context=head + context, prompt=prompt, answers=list(item.outputs), meta=meta)
