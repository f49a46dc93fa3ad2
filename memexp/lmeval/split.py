"""Where an lm-eval prompt's context ends and its question begins (the read-once rule needs the cut).

lm-eval hands a model one string per request; memexp reads the context once and answers each
question from a copy of the state, so it must find the cut:

- ``doc_field:<name>``: the document's ``<name>`` field is the context; the prompt is cut right
  after the field's text (LongBench's ``context``; the question, answer prefix and any text the
  template puts after the context are the question).
- ``last_line``: the prompt's last line is the question (RULER-style prompts, where lm-eval
  appends the answer prefix to the question line), the rest is the context; the newline opens
  the question, as in memexp's own RULER split.
- ``none``: nothing is shared: the whole prompt is the question, read after an empty context.
- ``auto`` (the default): ``doc_field:context`` when the document has a ``context`` field
  found in the prompt, else ``last_line`` when the prompt is one of the document's fields plus
  lm-eval's answer prefix (RULER's ``input``), else a ConfigError naming the task.
"""

from __future__ import annotations

from typing import Any

from memexp.core.schema import ConfigError

SPLITS = ("auto", "last_line", "none", "doc_field:<name>")
_FIX = "pass split=last_line|none|doc_field:<name> in --model_args"


def check_split(split: str) -> None:
    """One-line ConfigError for a split mode that is not one of SPLITS."""
    if split in ("auto", "last_line", "none"):
        return
    if split.startswith("doc_field:") and split.split(":", 1)[1]:
        return
    raise ConfigError(f"split={split!r}: allowed values are {', '.join(SPLITS)}")


def split_prompt(prompt: str, doc: dict[str, Any], split: str, task: str) -> tuple[str, str]:
    """(context, question) with context + question == prompt."""
    if split == "auto":
        split = _auto(prompt, doc, task)
    if split == "none":
        return "", prompt
    if split == "last_line":
        cut = prompt.rfind("\n")
        if cut < 0:
            raise ConfigError(f"task {task}: split=last_line but the prompt has one line; {_FIX}")
        return prompt[:cut], prompt[cut:]
    name = split.split(":", 1)[1]
    value = doc.get(name)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"task {task}: split={split} but its documents have no text field {name!r} "
                          f"(fields: {', '.join(sorted(doc))}); {_FIX}")
    at = prompt.find(value)
    if at < 0:
        raise ConfigError(f"task {task}: split={split} but the prompt does not contain the document's "
                          f"{name!r} text (the template rewrites it); {_FIX}")
    cut = at + len(value)
    return prompt[:cut], prompt[cut:]


def _auto(prompt: str, doc: dict[str, Any], task: str) -> str:
    context = doc.get("context")
    if isinstance(context, str) and context and context in prompt:
        return "doc_field:context"
    single = [k for k, v in doc.items() if isinstance(v, str) and "\n" in v and prompt.startswith(v)]
    if single:
        return "last_line"
    raise ConfigError(f"task {task}: cannot tell its context from its question: the documents have no "
                      f"'context' field in the prompt and the prompt is not one document field (RULER-style); "
                      f"{_FIX}")
