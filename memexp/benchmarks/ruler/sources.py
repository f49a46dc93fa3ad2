"""The outside text RULER needs: Paul Graham essays (essay haystack), SQuAD v2 dev (qa_1),
HotpotQA dev distractor (qa_2), and optionally a larger word list (cwe at long lengths).

Each comes from a local file named in the bench config, else from the hub dataset in the
Hugging Face cache (memexp.benchmarks.hub: cache first, downloaded only when online;
`python -m memexp data bench=ruler` fills the cache ahead of time, see `prefetch`).
Nothing here is needed by niah_single_1, niah_multikey_2/3, vt or fwe. A missing source
stops the run with one error that says which tasks need it, the hub id or file, and the
override that gives a local path.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from memexp.benchmarks import hub

ESSAYS_HUB = "baber/paul_graham_essays"  # the set lm-eval's RULER port loads (split train, field text)
ESSAYS_SPLIT = "train"
SQUAD_HUB = "rajpurkar/squad_v2"  # split validation = dev-v2.0.json, in file order
SQUAD_SPLIT = "validation"
# RULER's own download script pins this mirror of hotpot_dev_distractor_v1.json
HOTPOTQA_HUB = "namlh2004/hotpotqa"
HOTPOTQA_FILE = "hotpot_dev_distractor_v1.json"
HOTPOTQA_REVISION = "7e54db4656209750ff487f6fdf8e39a66dba136b"


class MissingData(RuntimeError):
    """A task's outside text is neither configured locally nor loadable from the hub."""


def hub_rows(repo_id: str, split: str):
    return hub.rows(hub.split_files(repo_id, split))


def hotpotqa_file() -> Path:
    return hub.file_path(HOTPOTQA_HUB, HOTPOTQA_FILE, HOTPOTQA_REVISION)


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


def _fill_hint(what: str) -> str:
    return (f"have {what} in the Hugging Face cache (`python -m memexp data bench=ruler` on a connected "
            f"machine; online runs fetch it)")


def _from_hub(load: Callable[[], Any], message: str) -> Any:
    try:
        return load()
    except Exception as e:
        raise MissingData(f"{message} (hub load failed: {_reason(e)})") from e


def load_essays(path: Optional[str], tasks: list[str], standin: bool = False) -> Loaded:
    """The essay text: RULER's PaulGrahamEssays.json ({"text": ...}), a .txt file, the hub set,
    or with `standin` memexp's generated stand-in prose (memexp.benchmarks.ruler.standin)."""
    if standin:
        from memexp.benchmarks.ruler.standin import standin_text

        text = standin_text()
        return Loaded(text, _digest(text.encode()))
    if path is not None:
        raw = _local_file("essay_path", path)
        text = json.loads(raw)["text"] if path.endswith(".json") else raw.decode("utf-8")
        return Loaded(text, _digest(text.encode()))

    def hub() -> str:
        return " ".join(row["text"] for row in hub_rows(ESSAYS_HUB, ESSAYS_SPLIT))

    text = _from_hub(
        hub,
        f"RULER task(s) {', '.join(tasks)} need the Paul Graham essays: pass "
        f"bench.essay_path=/path/PaulGrahamEssays.json (RULER's file with a \"text\" field, or a .txt file), "
        f"or {_fill_hint(f'the hub dataset {ESSAYS_HUB} (split {ESSAYS_SPLIT})')}",
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
        return _squad_from_rows(hub_rows(SQUAD_HUB, SQUAD_SPLIT))

    data = _from_hub(
        hub,
        "RULER task qa_1 needs SQuAD v2.0 dev: pass bench.squad_path=/path/dev-v2.0.json, "
        f"or {_fill_hint(f'the hub dataset {SQUAD_HUB} (split {SQUAD_SPLIT})')}",
    )
    return Loaded(data, _digest(json.dumps(data, sort_keys=True).encode()))


def load_hotpotqa(path: Optional[str]) -> Loaded:
    """HotpotQA dev (distractor setting) as the parsed hotpot_dev_distractor_v1.json."""
    if path is not None:
        raw = _local_file("hotpotqa_path", path)
        return Loaded(json.loads(raw), _digest(raw))

    def hub() -> bytes:
        return hotpotqa_file().read_bytes()

    raw = _from_hub(
        hub,
        f"RULER task qa_2 needs HotpotQA dev (distractor): pass bench.hotpotqa_path=/path/{HOTPOTQA_FILE}, "
        f"or {_fill_hint(f'{HOTPOTQA_FILE} of the hub dataset {HOTPOTQA_HUB} (revision {HOTPOTQA_REVISION})')}",
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


def prefetch(cfg) -> list[tuple[str, str]]:
    """Every hub source RULER's tasks read, into the Hugging Face cache (found there when
    already cached, offline too), except those the config gives as local files; returns
    (source, where it is) pairs. Missing ones are one MissingData naming each and its override."""
    wanted = [
        ("essays", cfg.essay_path, lambda: hub.split_files(ESSAYS_HUB, ESSAYS_SPLIT),
         f"{ESSAYS_HUB} (split {ESSAYS_SPLIT}) or bench.essay_path=/path/PaulGrahamEssays.json"),
        ("squad", cfg.squad_path, lambda: hub.split_files(SQUAD_HUB, SQUAD_SPLIT),
         f"{SQUAD_HUB} (split {SQUAD_SPLIT}) or bench.squad_path=/path/dev-v2.0.json"),
        ("hotpotqa", cfg.hotpotqa_path, lambda: [hotpotqa_file()],
         f"{HOTPOTQA_HUB}/{HOTPOTQA_FILE} or bench.hotpotqa_path=/path/{HOTPOTQA_FILE}"),
    ]
    found, missing = [], []
    for name, local, fetch, needs in wanted:
        if local is not None:
            found.append((name, f"{local} (local)"))
            continue
        try:
            found.append((name, str(Path(fetch()[0]).parent)))
        except Exception as e:
            missing.append(f"{name}: {needs} ({_reason(e)})")
    # cwe's default words ship with wonderwords; RULER's larger english_words.json has no hub copy
    found.append(("cwe_words", f"{cfg.cwe_words_path} (local)" if cfg.cwe_words_path else "wonderwords (installed)"))
    if missing:
        raise MissingData(f"RULER sources not available: {'; '.join(missing)}")
    return found
