"""Which needle a RULER run's answers came from: the asked key's, the first needle's, another's, none.

A model that reads by key answers the asked needle's value; one that copies "a value after
'is:'" answers some needle's, the asked one by chance (1 in 4 on niah_multikey_1). This reads a
run folder (config.yaml and records.jsonl), rebuilds its examples from the config (RULER's
generator is deterministic given the seed; the backbone is loaded for its tokenizer), finds the
needles in each context with RULER's needle template, and counts, per task, where each
prediction's value came from:

    python scripts/probe/multikey_answer_source.py outputs/runs/.../plain/<run> [more run folders]

Questions with several answers (multi-value, multi-query) count as "asked" only when the
prediction holds all of them, as RULER's string_match_all scores them.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import yaml

from memexp.benchmarks.ruler.templates import NEEDLE

SOURCES = ("asked", "first needle", "other needle", "no needle")


def needle_pattern() -> re.Pattern:
    """RULER's needle sentence with its key and value as groups (any needle type)."""
    pattern = re.escape(NEEDLE)
    for name, group in (("type_needle_v", r"\w+"), ("key", r"(.+?)"), ("value", r"(\S+?)")):
        pattern = pattern.replace(re.escape("{" + name + "}"), group)
    return re.compile(pattern)


def answer_source(context: str, prediction: str, references: list[str]) -> str:
    """One of SOURCES: `references` all in the prediction (asked); else the first needle of the
    context whose value the prediction holds, named first or other; else no needle."""
    if all(r in prediction for r in references):
        return "asked"
    values = [value for _, value in needle_pattern().findall(context)]
    for i, value in enumerate(values):
        if value in prediction:
            return "first needle" if i == 0 else "other needle"
    return "no needle"


def count_sources(folder: Path) -> dict[str, Counter]:
    """Per task, how many of the run's predictions came from each source."""
    from omegaconf import OmegaConf

    from memexp.backbones import load_backbone
    from memexp.benchmarks import build_benchmark
    from memexp.core.schema import validate

    cfg = validate(OmegaConf.create(yaml.safe_load((folder / "config.yaml").read_text())))
    tokenizer = load_backbone(cfg.backbone).tokenizer
    contexts = {}
    for example in build_benchmark(cfg.bench).examples(tokenizer):
        for question in example.questions:
            contexts[question.id] = example.context
    counts: dict[str, Counter] = defaultdict(Counter)
    for line in (folder / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        source = answer_source(contexts[record["question_id"]], record["prediction"], record["references"])
        counts[record["task"]][source] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (config.yaml, records.jsonl)")
    args = parser.parse_args()
    for folder in args.runs:
        for task, counts in sorted(count_sources(folder).items()):
            print(f"{folder} {task}: " + ", ".join(f"{s} {counts[s]}" for s in SOURCES))


if __name__ == "__main__":
    main()
