"""The RULER task table (NVIDIA/RULER scripts/synthetic.yaml): which generator each task
uses and with which arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class NiahTask:
    haystack: str  # noise | essay | needle
    type_k: str  # words | numbers | uuids
    type_v: str
    num_k: int = 1
    num_v: int = 1
    num_q: int = 1


@dataclass(frozen=True)
class VariableTrackingTask:
    num_chains: int = 1
    num_hops: int = 4


@dataclass(frozen=True)
class CommonWordsTask:
    freq_cw: int = 30
    freq_ucw: int = 3
    num_cw: int = 10
    num_fewshot: int = 1


@dataclass(frozen=True)
class FreqWordsTask:
    alpha: float = 2.0
    coded_wordlen: int = 6


@dataclass(frozen=True)
class QaTask:
    dataset: str  # squad | hotpotqa


TaskSpec = Union[NiahTask, VariableTrackingTask, CommonWordsTask, FreqWordsTask, QaTask]

TASKS: dict[str, TaskSpec] = {
    "niah_single_1": NiahTask("noise", "words", "numbers"),
    "niah_single_2": NiahTask("essay", "words", "numbers"),
    "niah_single_3": NiahTask("essay", "words", "uuids"),
    "niah_multikey_1": NiahTask("essay", "words", "numbers", num_k=4),
    "niah_multikey_2": NiahTask("needle", "words", "numbers"),
    "niah_multikey_3": NiahTask("needle", "uuids", "uuids"),
    "niah_multivalue": NiahTask("essay", "words", "numbers", num_v=4),
    "niah_multiquery": NiahTask("essay", "words", "numbers", num_q=4),
    "vt": VariableTrackingTask(),
    "cwe": CommonWordsTask(),
    "fwe": FreqWordsTask(),
    "qa_1": QaTask("squad"),
    "qa_2": QaTask("hotpotqa"),
}


def needs_essays(task: str) -> bool:
    spec = TASKS[task]
    return isinstance(spec, NiahTask) and spec.haystack == "essay"
