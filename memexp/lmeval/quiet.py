"""What `memexp lm-eval` changes in lm-eval's surroundings so that an offline run prints only
its results: each is a narrow fix for one message that says nothing about the run.

- nltk's punkt_tab: lm-eval's RULER module downloads it at import (an offline machine prints a
  download error, then "Downloaded punkt_tab"). memexp already ships NLTK's English punkt_tab
  parameters (the `punkt` package, memexp.benchmarks.ruler.sentences): they are written once as
  an nltk data folder under the root, which nltk then finds.
- transformers' "You are using a model of type gated_deltanet to instantiate a model of type ``":
  lm-eval's RULER sizes its data with AutoTokenizer on the backbone's folder, whose config.json
  names a model type transformers does not know; the tokenizer loads all the same.
- `fatal: not a git repository`: lm-eval asks git for its commit with git's stderr left open.
- a `4096 ... -1` row: lm-eval's RULER reports -1 for each default length the run did not ask
  for; the printed table leaves those rows out (the results JSON keeps them, as lm-eval wrote).
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

PUNKT_FILES = {"abbrev_types.txt": "ABBREV_TYPES", "sent_starters.txt": "SENT_STARTERS",
               "collocations.tab": "COLLOCATIONS", "ortho_context.tab": "ORTHO_CONTEXT"}


def punkt_tab(root: Path) -> Path | None:
    """nltk's tokenizers/punkt_tab/english under `root` from the `punkt` package's parameters,
    on nltk's data path; None where nltk already has punkt_tab (or nltk or punkt is missing)."""
    try:
        import nltk
        import punkt.data.english as english
    except ImportError:
        return None
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return None
    except LookupError:
        pass
    folder = root / "tokenizers" / "punkt_tab" / "english"
    if not (folder / "ortho_context.tab").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        lines = {
            "abbrev_types.txt": sorted(english.ABBREV_TYPES),
            "sent_starters.txt": sorted(english.SENT_STARTERS),
            "collocations.tab": sorted("\t".join(pair) for pair in english.COLLOCATIONS),
            "ortho_context.tab": sorted(f"{word}\t{flags}" for word, flags in english.ORTHO_CONTEXT.items()),
        }
        for name, rows in lines.items():
            (folder / name).write_text("".join(f"{row}\n" for row in rows), encoding="utf-8")
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    return folder


class _UnknownModelType(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("You are using a model of type")


def _git_hash() -> str | None:
    try:
        out = subprocess.run(["git", "describe", "--always"], capture_output=True, text=True, check=True)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    return out.stdout.strip() or None


def _without_absent_lengths(make_table):
    def table(result_dict, column: str = "results", sort_results: bool = False):
        results = {task: {k: v for k, v in metrics.items() if not _absent_length(k, v, metrics)}
                   for task, metrics in (result_dict.get(column) or {}).items()}
        return make_table({**result_dict, column: results}, column, sort_results)

    return table


def _absent_length(key: str, value, metrics: dict) -> bool:
    """A RULER length metric (`4096,none`) of -1, and its stderr: no sample of that length ran."""
    name, _, filt = key.partition(",")
    length = name.removesuffix("_stderr")
    if not length.isdigit():
        return False
    return metrics.get(f"{length},{filt}") == -1


def quiet(root: Path) -> None:
    """Apply every fix above (see the module docstring); `root`: where the nltk data folder goes."""
    import lm_eval.evaluator
    import lm_eval.utils

    punkt_tab(root)
    logging.getLogger("transformers.configuration_utils").addFilter(_UnknownModelType())
    lm_eval.evaluator.get_git_commit_hash = _git_hash
    if not getattr(lm_eval.utils.make_table, "memexp_quiet", False):
        lm_eval.utils.make_table = _without_absent_lengths(lm_eval.utils.make_table)
        lm_eval.utils.make_table.memexp_quiet = True
