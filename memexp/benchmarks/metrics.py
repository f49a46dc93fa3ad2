"""Official metrics, one function each, scores in [0, 100] per prediction.

Each cites the file it follows; tests pin them to hand-computed tables.
"""

from __future__ import annotations

import re
import string
from collections import Counter

# bump when any metric's score of the same prediction changes: run folder keys include it
# (memexp.run.identity), so scores from an older metric are never resumed as current ones
VERSION = 1

_CONTROL = re.compile(r"[\x00-\x1f]")


def ruler_postprocess(pred: str) -> str:
    """RULER scripts/eval/evaluate.py: strip, control characters to newlines, strip."""
    return _CONTROL.sub("\n", pred.strip()).strip()


def string_match_all(prediction: str, references: list[str]) -> float:
    """RULER (NIAH, vt, cwe, fwe): fraction of references found in the prediction, case-insensitive."""
    if not references:
        return 0.0
    pred = prediction.lower()
    return 100.0 * sum(ref.lower() in pred for ref in references) / len(references)


def string_match_part(prediction: str, references: list[str]) -> float:
    """RULER QA: 100 if any reference is found in the prediction, case-insensitive (RULER's
    own any-match, not lm-eval's fractional port)."""
    pred = prediction.lower()
    return 100.0 * float(any(ref.lower() in pred for ref in references))


_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """LongBench LongBench/metrics.py and MemoryAgentBench utils/eval_other_utils.py (both
    from the SQuAD script): lower case, drop ASCII punctuation, articles to a space,
    collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_f1(prediction_tokens: list[str], reference_tokens: list[str]) -> float:
    """Bag-of-tokens F1 in [0, 1]; 0 when nothing overlaps (also for empty inputs)."""
    common = Counter(prediction_tokens) & Counter(reference_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(prediction_tokens)
    recall = same / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def qa_f1(prediction: str, references: list[str]) -> float:
    """LongBench qa_f1_score: token F1 of normalised answers, max over references."""
    pred = normalize_answer(prediction).split()
    return 100.0 * max((token_f1(pred, normalize_answer(ref).split()) for ref in references), default=0.0)


def rouge_l(prediction: str, references: list[str]) -> float:
    """LongBench rouge_score: the `rouge` package's ROUGE-L F (summary-level union LCS over
    '.'-split sentences, case-sensitive, words counted as sets), 0 when it raises (empty
    prediction or reference); max over references."""
    from rouge import Rouge

    def one(ref: str) -> float:
        try:
            return Rouge().get_scores([prediction], [ref], avg=True)["rouge-l"]["f"]
        except Exception:  # LongBench maps every failure of the package to 0
            return 0.0

    return 100.0 * max((one(ref) for ref in references), default=0.0)


def classification(prediction: str, references: list[str], all_classes: list[str]) -> float:
    """LongBench classification_score (trec), max over references."""
    return 100.0 * max((_classification_one(prediction, ref, all_classes) for ref in references), default=0.0)


def _classification_one(prediction: str, reference: str, all_classes: list[str]) -> float:
    matches = [c for c in all_classes if c in prediction]
    # The official loop removes from the list it iterates over, so the class right after a
    # removed one is never examined; walking an index the same way keeps its scores.
    i = 0
    while i < len(matches):
        term = matches[i]
        i += 1
        if term in reference and term != reference:
            matches.remove(term)
    return 1.0 / len(matches) if reference in matches else 0.0


def substring_exact_match(prediction: str, references: list[str]) -> float:
    """MemoryAgentBench substring_exact_match: a normalised reference inside the
    normalised prediction, max over references."""
    pred = normalize_answer(prediction)
    return 100.0 * float(any(normalize_answer(ref) in pred for ref in references))


def mab_parse_output(output: str, answer_prefix: str = "Answer:") -> str | None:
    """MemoryAgentBench parse_output: text after the first `answer_prefix` up to the line
    end (case-insensitive), else the first line; stripped, one repeated prefix removed."""
    for pattern in (re.compile(f"(?:{answer_prefix})(.*)(?:\n|$)", flags=re.IGNORECASE),
                    re.compile(r"(?:^)(.*)(?:\n|$)")):
        match = pattern.search(output)
        if match:
            text = match[1].strip()
            return re.sub(f"^{re.escape(answer_prefix)}", "", text, flags=re.IGNORECASE).strip()
    return None


def longbench_v2_choice(response: str) -> str | None:
    """LongBench v2 pred.py extract_answer on the stripped response: asterisks removed,
    'The correct answer is (X)' then 'The correct answer is X'; None when neither matches."""
    response = response.strip().replace("*", "")
    for pattern in (r"The correct answer is \(([A-D])\)", r"The correct answer is ([A-D])"):
        match = re.search(pattern, response)
        if match:
            return match.group(1)
    return None


def longhealth_choice(response: str) -> str:
    """LongHealth parse_model_choice: the first 'The correct answer is X:' letter, else ''."""
    found = re.findall(r"The correct answer is (\w):", response)
    return found[0] if found else ""
