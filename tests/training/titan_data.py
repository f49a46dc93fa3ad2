"""Tiny local copies of the Titan-Llama post-training sources, each in its source's layout
(FineWeb-Edu: rows with `text`; LongAlign-10k: `messages` of role/content turns; LoongRL:
`prompt` turns and `reward_model.ground_truth`; QuALITY: one article per JSON line, no file
suffix, `questions` with 1-based `gold_label`)."""

from __future__ import annotations

import json
from pathlib import Path

FINEWEB = [f"Document {i}: " + "the quick brown fox jumps over the lazy dog. " * (1 + i % 3) for i in range(12)]
LONGALIGN = [{"messages": [{"role": "user", "content": f"Summarise text number {i}: " + "lorem ipsum " * 4},
                           {"role": "assistant", "content": f"Summary {i}."}]} for i in range(6)]
LOONGRL = [{"prompt": [{"role": "user", "content": f"Context {i}: " + "many facts here. " * 6 + "Which city?"}],
            "reward_model": {"ground_truth": [f"City{i}", f"city{i}"]}} for i in range(4)]
QUALITY = [{"article_id": f"a{a}", "set_unique_id": f"a{a}_s", "article": f"Story {a}. " + "Once upon a time. " * 3,
            "questions": [{"question": f"Q{a}.{j}?", "options": ["one", "two", "three", "four"],
                           "gold_label": 1 + (a + j) % 4} for j in range(2)]} for a in range(3)]


def write_sources(root: Path) -> dict[str, str]:
    """The four files under `root`; returns the recipe overrides that point at them."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "fineweb.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in FINEWEB))
    (root / "longalign.jsonl").write_text("".join(json.dumps(r) + "\n" for r in LONGALIGN))
    (root / "loongrl").mkdir(exist_ok=True)
    (root / "loongrl" / "train.json").write_text(json.dumps(LOONGRL))
    (root / "QuALITY.v1.0.1.htmlstripped.train").write_text("".join(json.dumps(r) + "\n" for r in QUALITY))
    return {"fineweb.path": str(root / "fineweb.jsonl"), "longalign.path": str(root / "longalign.jsonl"),
            "loongrl.path": str(root / "loongrl"), "quality.path": str(root / "QuALITY.v1.0.1.htmlstripped.train")}
