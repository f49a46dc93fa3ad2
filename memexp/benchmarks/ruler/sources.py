"""The outside text RULER needs: Paul Graham essays (essay haystack), SQuAD v2 dev (qa_1),
HotpotQA dev distractor (qa_2), and optionally a larger word list (cwe at long lengths).

Each comes from a local file named in the bench config or, when online, from the hub.
Nothing here is needed by niah_single_1, niah_multikey_2/3, vt or fwe. A missing source
stops the run with one error that says which tasks need it and how to pass it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

ESSAYS_HUB = "baber/paul_graham_essays"  # the set lm-eval's RULER port loads (split train, field text)
SQUAD_HUB = "rajpurkar/squad_v2"  # split validation = dev-v2.0.json, in file order
# RULER's own download script pins this mirror of hotpot_dev_distractor_v1.json
HOTPOTQA_HUB = "namlh2004/hotpotqa"
HOTPOTQA_FILE = "hotpot_dev_distractor_v1.json"
HOTPOTQA_REVISION = "7e54db4656209750ff487f6fdf8e39a66dba136b"


class MissingData(RuntimeError):
    """A task's outside text is neither configured locally nor loadable from the hub."""


@dataclass(frozen=True)
class Loaded:
    value: Any
    fingerprint: str  # hash of the content: part of the example cache key


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _local_file(field: str, path: str) -> bytes:
    p = Path(path).expanduser()
    if not p.is_file():
        raise MissingData(f"bench.{field}={path!r}: no such file")
    return p.read_bytes()


def _reason(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _from_hub(load: Callable[[], Any], message: str) -> Any:
    try:
        return load()
    except Exception as e:
        raise MissingData(f"{message} (hub load failed: {_reason(e)})") from e


def load_essays(path: Optional[str], tasks: list[str]) -> Loaded:
    """The essay text: RULER's PaulGrahamEssays.json ({"text": ...}), a .txt file, or the hub set."""
    if path is not None:
        raw = _local_file("essay_path", path)
        text = json.loads(raw)["text"] if path.endswith(".json") else raw.decode("utf-8")
        return Loaded(text, _digest(text.encode()))

    def hub() -> str:
        import datasets

        return " ".join(datasets.load_dataset(ESSAYS_HUB, split="train")["text"])

    text = _from_hub(
        hub,
        f"RULER task(s) {', '.join(tasks)} need the Paul Graham essays: pass bench.essay_path=<file> "
        f"(RULER's PaulGrahamEssays.json with a \"text\" field, or a .txt file), or run online with "
        f"the `datasets` package installed to load the hub set {ESSAYS_HUB}",
    )
    return Loaded(text, _digest(text.encode()))


def _squad_from_rows(rows) -> dict:
    """Rebuild dev-v2.0.json's nesting (articles > paragraphs > questions) from hub rows,
    which keep the file order; unanswerable questions have no answers."""
    articles: list[dict] = []
    for row in rows:
        if not articles or articles[-1]["title"] != row["title"]:
            articles.append({"title": row["title"], "paragraphs": []})
        paragraphs = articles[-1]["paragraphs"]
        if not paragraphs or paragraphs[-1]["context"] != row["context"]:
            paragraphs.append({"context": row["context"], "qas": []})
        texts = list(row["answers"]["text"])
        paragraphs[-1]["qas"].append(
            {
                "question": row["question"],
                "answers": [{"text": t} for t in texts],
                "is_impossible": not texts,
            }
        )
    return {"data": articles}


def load_squad(path: Optional[str]) -> Loaded:
    """SQuAD v2.0 dev as the parsed dev-v2.0.json."""
    if path is not None:
        raw = _local_file("squad_path", path)
        return Loaded(json.loads(raw), _digest(raw))

    def hub() -> dict:
        import datasets

        return _squad_from_rows(datasets.load_dataset(SQUAD_HUB, split="validation"))

    data = _from_hub(
        hub,
        "RULER task qa_1 needs SQuAD v2.0 dev: pass bench.squad_path=<dev-v2.0.json>, or run online "
        f"with the `datasets` package installed to load the hub set {SQUAD_HUB}",
    )
    return Loaded(data, _digest(json.dumps(data, sort_keys=True).encode()))


def load_hotpotqa(path: Optional[str]) -> Loaded:
    """HotpotQA dev (distractor setting) as the parsed hotpot_dev_distractor_v1.json."""
    if path is not None:
        raw = _local_file("hotpotqa_path", path)
        return Loaded(json.loads(raw), _digest(raw))

    def hub() -> bytes:
        from huggingface_hub import hf_hub_download

        file = hf_hub_download(HOTPOTQA_HUB, HOTPOTQA_FILE, repo_type="dataset", revision=HOTPOTQA_REVISION)
        return Path(file).read_bytes()

    raw = _from_hub(
        hub,
        f"RULER task qa_2 needs HotpotQA dev (distractor): pass bench.hotpotqa_path=<{HOTPOTQA_FILE}>, "
        f"or run online to download it from the hub dataset {HOTPOTQA_HUB}",
    )
    return Loaded(json.loads(raw), _digest(raw))


def load_words(path: str) -> Loaded:
    """Extra words for cwe: RULER's english_words.json (a JSON object whose values are the
    words), a JSON list, or a .txt file with one word per line."""
    raw = _local_file("cwe_words_path", path)
    if path.endswith(".json"):
        data = json.loads(raw)
        words = list(data.values()) if isinstance(data, dict) else list(data)
    else:
        words = [w.strip() for w in raw.decode("utf-8").splitlines() if w.strip()]
    return Loaded(words, _digest(raw))
