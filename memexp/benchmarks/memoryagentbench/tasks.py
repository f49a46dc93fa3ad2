"""MemoryAgentBench (HUST-AI-HYZ/MemoryAgentBench) as data: the NoteBank paper's 11
configurations and the long-context agent's templates.

Configurations are configs/data_conf/** (sub_dataset, context_max_length,
generation_max_length, max_test_samples); templates are utils/templates.py verbatim,
'long_context_agent' variant. The memorise templates contain a literal backslash-n
(written '\\\\n' in the official source) right after the time stamp: kept as is.
"""

from __future__ import annotations

from dataclasses import dataclass

SYSTEM_MESSAGE = "You are a helpful assistant that can read the context and memorize it for future retrieval."


@dataclass(frozen=True)
class Family:
    """Templates and scoring shared by the configurations of one dataset family."""

    name: str
    memorize: str  # wraps each chunk: {time_stamp}, {context}
    query: str  # wraps each question: {question}
    parsed_only: bool  # eventqa scores only the parsed output; the others take max(raw, parsed)


FAMILIES = {
    f.name: f
    for f in (
        Family(
            "ruler_qa",
            (
                "Dialogue between User and Assistant {time_stamp}\\n<User> The following context is "
                "the documents I have read: \n{context}\n <Assistant> I have learned the documents and "
                "I will answer the question you ask."
            ),
            (
                "Answer the question based on the memorized documents. Only give me the answer and "
                "do not output any other words. \n\nQuestion: {question} \n\n Answer:"
            ),
            parsed_only=False,
        ),
        Family(
            "eventqa",
            (
                "Dialogue between User and Assistant {time_stamp}\\n<User> The following context is "
                "the book excerpt: \n{context}\n <Assistant> I have read the book excerpt and I will "
                "answer the question you ask."
            ),
            (
                "Based on the context you memorized, complete the task below:\n\n{question}\n\n The event "
                "that happens next is:"
            ),
            parsed_only=True,
        ),
        Family(
            "factconsolidation",
            (
                "Dialogue between User and Assistant {time_stamp} \\n<User> The following context is "
                "the facts I have learned: \n{context}\n <Assistant> I have learned the facts and I "
                "will answer the question you ask."
            ),
            (
                "Pretend you are a knowledge management system. Each fact in the knowledge pool is "
                "provided with a serial number at the beginning, and the newer fact has larger serial "
                "number. \n You need to solve the conflicts of facts in the knowledge pool by finding "
                "the newest fact with larger serial number. You need to answer a question based on "
                "this rule. You should give a very concise answer without saying other words for the "
                "question **only** from the knowledge pool you have memorized rather than the real "
                "facts in real world. \n\nFor example:\n\n [Knowledge Pool] \n\n Question: Based on the "
                "provided Knowledge Pool, what is the name of the current president of Russia? \nAnswer: "
                "Donald Trump \n\n Now Answer the Question: Based on the provided Knowledge Pool, {question} "
                "\nAnswer:"
            ),
            parsed_only=False,
        ),
    )
}


@dataclass(frozen=True)
class MabTask:
    """One configuration: a `metadata.source` value of the hub split `split`."""

    source: str
    split: str
    family: str
    table: str  # the NoteBank paper's Table 6 column
    length: str  # column label of the summary table
    context_max_length: int  # tokens the agent keeps (left truncation) when its window is small
    max_new_tokens: int  # generation_max_length
    max_contexts: int  # max_test_samples: first rows of the source


def _fact(hops: str, size: str, context_max_length: int) -> MabTask:
    table = "factconsolidation_single_hop" if hops == "sh" else "factconsolidation_multi_hop"
    return MabTask(f"factconsolidation_{hops}_{size}", "Conflict_Resolution", "factconsolidation", table, size,
                   context_max_length, 10, 1)


TASKS: dict[str, MabTask] = {
    t.source: t
    for t in (
        _fact("sh", "6k", 6000),
        _fact("sh", "32k", 32768),
        _fact("sh", "262k", 300000),
        _fact("mh", "6k", 6000),
        _fact("mh", "32k", 32768),
        _fact("mh", "262k", 300000),
        MabTask("eventqa_65536", "Accurate_Retrieval", "eventqa", "eventqa", "64k", 65536, 40, 5),
        MabTask("eventqa_131072", "Accurate_Retrieval", "eventqa", "eventqa", "128k", 131072, 40, 5),
        MabTask("eventqa_full", "Accurate_Retrieval", "eventqa", "eventqa", "full", 800000, 40, 5),
        MabTask("ruler_qa1_197K", "Accurate_Retrieval", "ruler_qa", "ruler_qa", "197k", 220000, 50, 100),
        MabTask("ruler_qa2_421K", "Accurate_Retrieval", "ruler_qa", "ruler_qa", "421k", 524288, 50, 100),
    )
}
