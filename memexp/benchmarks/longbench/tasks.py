"""LongBench v1: the 12 English subsets the NoteBank paper evaluates, as data.

Prompts are LongBench/config/dataset2prompt.json verbatim (typos included: "asconcisely"
in narrativeqa, the space in qasper's "\\n\\n Answer"), filled with str.format from the
record's `context` and `input`; output limits are LongBench/config/dataset2maxlen.json;
metrics are LongBench/eval.py's dataset2metric; categories are the NoteBank paper's Table 1.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LongBenchTask:
    name: str
    category: str  # Table 1 column
    template: str  # one {context} and at most one {input}
    max_new_tokens: int
    metric: str  # qa_f1 | rouge_l | classification
    chat_template: bool = True  # pred.py skips build_chat for trec, triviaqa, samsum
    first_line: bool = False  # eval.py scores only the first line for trec, triviaqa, samsum
    stop_at_newline: bool = False  # pred.py: samsum also stops at "\n" after >= 1 new token


CATEGORIES = ("single_doc_qa", "multi_doc_qa", "summarization", "few_shot")

_MULTI_DOC_QA = (
    "Answer the question based on the given passages. Only give me the answer and do not "
    "output any other words.\n"
    "\nThe following are given passages.\n{context}\n"
    "\nAnswer the question based on the given passages. Only give me the answer and do not "
    "output any other words.\n"
    "\nQuestion: {input}\nAnswer:"
)

TASKS: dict[str, LongBenchTask] = {
    t.name: t
    for t in (
        LongBenchTask(
            "narrativeqa",
            "single_doc_qa",
            (
                "You are given a story, which can be either a novel or a movie script, and a question. "
                "Answer the question asconcisely as you can, using a single phrase if possible. Do not "
                "provide any explanation.\n"
                "\nStory: {context}\n\nNow, answer the question based on the story asconcisely as you can, "
                "using a single phrase if possible. Do not provide any explanation.\n"
                "\nQuestion: {input}\n\nAnswer:"
            ),
            128,
            "qa_f1",
        ),
        LongBenchTask(
            "qasper",
            "single_doc_qa",
            (
                "You are given a scientific article and a question. Answer the question as concisely as "
                "you can, using a single phrase or sentence if possible. If the question cannot be "
                "answered based on the information in the article, write \"unanswerable\". If the question "
                "is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any "
                "explanation.\n"
                "\nArticle: {context}\n\n Answer the question based on the above article as concisely as you "
                "can, using a single phrase or sentence if possible. If the question cannot be answered "
                "based on the information in the article, write \"unanswerable\". If the question is a "
                "yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n"
                "\nQuestion: {input}\n\nAnswer:"
            ),
            128,
            "qa_f1",
        ),
        LongBenchTask(
            "multifieldqa_en",
            "single_doc_qa",
            (
                "Read the following text and answer briefly.\n"
                "\n{context}\n\nNow, answer the following question based on the above text, only give me the "
                "answer and do not output any other words.\n"
                "\nQuestion: {input}\nAnswer:"
            ),
            64,
            "qa_f1",
        ),
        LongBenchTask(
            "hotpotqa",
            "multi_doc_qa",
            _MULTI_DOC_QA,
            32,
            "qa_f1",
        ),
        LongBenchTask(
            "2wikimqa",
            "multi_doc_qa",
            _MULTI_DOC_QA,
            32,
            "qa_f1",
        ),
        LongBenchTask(
            "musique",
            "multi_doc_qa",
            _MULTI_DOC_QA,
            32,
            "qa_f1",
        ),
        LongBenchTask(
            "gov_report",
            "summarization",
            (
                "You are given a report by a government agency. Write a one-page summary of the report.\n"
                "\nReport:\n{context}\n\nNow, write a one-page summary of the report.\n"
                "\nSummary:"
            ),
            512,
            "rouge_l",
        ),
        LongBenchTask(
            "qmsum",
            "summarization",
            (
                "You are given a meeting transcript and a query containing a question or instruction. "
                "Answer the query in one or more sentences.\n"
                "\nTranscript:\n{context}\n\nNow, answer the query based on the above meeting transcript in "
                "one or more sentences.\n"
                "\nQuery: {input}\nAnswer:"
            ),
            512,
            "rouge_l",
        ),
        LongBenchTask(
            "multi_news",
            "summarization",
            (
                "You are given several news passages. Write a one-page summary of all news. \n"
                "\nNews:\n{context}\n\nNow, write a one-page summary of all the news.\n"
                "\nSummary:"
            ),
            512,
            "rouge_l",
        ),
        LongBenchTask(
            "trec",
            "few_shot",
            (
                "Please determine the type of the question below. Here are some examples of questions.\n"
                "\n{context}\n{input}"
            ),
            64,
            "classification", chat_template=False, first_line=True,
        ),
        LongBenchTask(
            "triviaqa",
            "few_shot",
            (
                "Answer the question based on the given passage. Only give me the answer and do not output "
                "any other words. The following are some examples.\n"
                "\n{context}\n\n{input}"
            ),
            32,
            "qa_f1", chat_template=False, first_line=True,
        ),
        LongBenchTask(
            "samsum",
            "few_shot",
            (
                "Summarize the dialogue into a few short sentences. The following are some examples.\n"
                "\n{context}\n\n{input}"
            ),
            128,
            "rouge_l", chat_template=False, first_line=True, stop_at_newline=True,
        ),
    )
}
