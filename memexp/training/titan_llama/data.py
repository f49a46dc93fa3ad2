"""The post-training text of each stage, as the authors' train_datasets.py and
sft_kvwrite_quality_mc.py build it, from local copies or the hub.

Every sequence is `ids` with `labels` of the same length (IGNORE where no loss is taken; the loss
predicts labels[t + 1] from ids[: t + 1]). The streams (all deterministic in the recipe's
data_seed, so a resumed run re-reads exactly the sequences it had not consumed):

- pretrain_mix: blocks of sequence_length tokens, alternating packed FineWeb-Edu (documents
  joined with one EOS) and packed LongAlign conversations (every token supervised, cycled);
  FineWeb first when data_seed is odd (MixedLongAlignFineWebPretrainDataset);
- gold_sft: longalign_examples LongAlign rows (assistant tokens only) and loongrl_examples
  LoongRL rows (the first gold answer only) in one shuffled schedule, repeated
  (MixedLongAlignLoongRLSFTDataset);
- quality_sft: QuALITY train questions as "{article}\\n\\nQuestion: ...\\nChoices:\\nA. ...\\nAnswer:"
  with the loss on " {letter}", shuffled (seed 271828, the code's) and cycled to quality_examples;
- niah (tiny_titan): memexp's NIAH text, loss on the answer (value, '.', EOS); brought by
  memexp.embedded.tiny_titan (`stage_stream`'s `extra`).

Prompts use the backbone's chat template when it has one (Llama-3.2-Instruct), else the code's
fallback "User: ...\\nAssistant:" form (the byte tokenizer of the tiny models). An assistant turn
ends with the tokenizer's EOS id (the template's end-of-turn token is what the code appends).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from memexp.core.schema import ConfigError
from memexp.training.loss import IGNORE
from memexp.training.titan_llama.config import Source, Stage, TitanLlamaRecipe

QUALITY_SEED = 271828  # the code's shuffle of QuALITY's questions
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
ROLES = {"human": "user", "user": "user", "prompter": "user", "instruction": "user", "input": "user",
         "gpt": "assistant", "assistant": "assistant", "model": "assistant", "bot": "assistant",
         "output": "assistant", "response": "assistant", "system": "system"}


@dataclass(frozen=True)
class Sequence:
    ids: list[int]
    labels: list[int]


def file_rows(path: Path) -> Iterator[dict]:
    """Rows of one local file: .parquet, .json (a list or one object), else JSON lines
    (QuALITY's files have no suffix)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.read_table(path).to_pylist()
    elif path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        yield from data if isinstance(data, list) else [data]
    else:
        with open(path, encoding="utf-8") as f:
            yield from (json.loads(line) for line in f if line.strip())


def source_rows(src: Source) -> Iterator[dict]:
    """The rows of a local copy (a file, or a folder's .jsonl / .json / .parquet files in name
    order), else of the hub dataset, streamed."""
    if src.path is not None:
        root = Path(src.path).expanduser()
        files = [root] if root.is_file() else sorted(
            p for p in root.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json", ".parquet"))
        for path in files:
            yield from file_rows(path)
        return
    from datasets import load_dataset

    yield from load_dataset(src.hub, src.config, split=src.split, streaming=True)


def shuffled(rows: Iterable, size: int, rng: random.Random) -> Iterator:
    """A streaming shuffle: a buffer of `size` rows, each draw replaced by the next row."""
    buffer = []
    for row in rows:
        if len(buffer) < size:
            buffer.append(row)
            continue
        i = rng.randrange(size)
        yield buffer[i]
        buffer[i] = row
    rng.shuffle(buffer)
    yield from buffer


def messages_of(row: dict) -> list[dict]:
    """A row's conversation as [{role, content}], from `messages` / `conversations` (with
    from/value or role/content keys) or prompt/response fields."""
    for key in ("messages", "conversations"):
        out = []
        for m in row.get(key) or []:
            if isinstance(m, dict):
                content = str(m.get("content", m.get("value", m.get("text", ""))) or "").strip()
                role = str(m.get("role", m.get("from", m.get("speaker", ""))) or "").lower()
                if content:
                    out.append({"role": ROLES.get(role, role or "user"), "content": content})
        if any(m["role"] == "assistant" for m in out):
            return out
    prompt = row.get("prompt") or row.get("instruction") or row.get("question") or row.get("input")
    answer = row.get("response") or row.get("output") or row.get("answer") or row.get("completion")
    if isinstance(prompt, str) and answer:
        return [{"role": "user", "content": prompt.strip()}, {"role": "assistant", "content": str(answer).strip()}]
    return []


class Formatter:
    """Prompt and answer ids with the backbone's tokenizer and chat template."""

    def __init__(self, backbone) -> None:
        self.backbone = backbone
        self.tok = backbone.tokenizer
        self.chat = backbone.chat_template is not None

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """The turns before the answer, ending where the assistant's text begins."""
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system") or None
        if self.chat:
            user = "\n\n".join(m["content"] for m in messages if m["role"] != "system")
            return self.tok.encode(self.backbone.chat_prompt(user, system))
        text = "".join(f"{m['role'].capitalize()}: {m['content']}\n" for m in messages) + "Assistant:"
        return self.tok.encode(text, add_bos=True)

    def answer_ids(self, text: str) -> list[int]:
        return self.tok.encode(text if self.chat else " " + text) + [self.tok.eos_id]

    def sft(self, messages: list[dict], max_len: int, causal: bool) -> Sequence | None:
        """The first assistant turn after its prompt; too long: the prompt's tail is kept (the
        answer's tail if the answer alone is too long); a prompt of max_len or more is skipped."""
        first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), None)
        if first is None:
            return None
        prompt, answer = self.prompt_ids(messages[:first]), self.answer_ids(messages[first]["content"])
        if len(prompt) >= max_len:
            return None
        if len(answer) >= max_len:
            ids, labels = answer[-max_len:], answer[-max_len:]
        else:
            prompt = prompt[len(prompt) + len(answer) - max_len:] if len(prompt) + len(answer) > max_len else prompt
            ids, labels = prompt + answer, [IGNORE] * len(prompt) + answer
        return Sequence(ids, list(ids) if causal else labels)


def packed(docs: Iterable[list[int]], length: int, eos: int) -> Iterator[Sequence]:
    """Documents joined with one EOS into dense blocks of `length` tokens, every token a label."""
    buffer: list[int] = []
    for ids in docs:
        if not ids:
            continue
        buffer.extend(ids)
        if buffer[-1] != eos:
            buffer.append(eos)
        while len(buffer) >= length:
            block, buffer = buffer[:length], buffer[length:]
            yield Sequence(block, list(block))


def passes(make, what: str) -> Iterator:
    """make(0), make(1), ... chained: a source read pass after pass (a fresh shuffle each, as the
    code restarts its streams); a pass with nothing usable is an error, not an endless loop."""
    epoch = 0
    while True:
        empty = True
        for item in make(epoch):
            empty = False
            yield item
        if empty:
            raise ValueError(f"{what}: no usable row (rows too long for recipe.sequence_length, or none at all)")
        epoch += 1


def shuffled_source(recipe: TitanLlamaRecipe, src: Source, seed: int) -> Iterator[dict]:
    return shuffled(source_rows(src), recipe.shuffle_buffer, random.Random(seed))


def longalign_sequences(recipe: TitanLlamaRecipe, fmt: Formatter, causal: bool) -> Iterator[Sequence]:
    """LongAlign's first assistant turns, pass after pass (seed + pass shuffles each)."""
    n, seed = recipe.sequence_length, recipe.data_seed
    return passes(lambda e: (s for s in (fmt.sft(messages_of(r), n, causal) for r in
                                         shuffled_source(recipe, recipe.longalign, seed + e)) if s is not None),
                  "recipe.longalign")


def pretrain_mix(recipe: TitanLlamaRecipe, fmt: Formatter) -> Iterator[Sequence]:
    n, eos, seed = recipe.sequence_length, fmt.tok.eos_id, recipe.data_seed
    docs = passes(lambda e: (ids for ids in (fmt.tok.encode(r.get("text") or "") for r in
                                             shuffled_source(recipe, recipe.fineweb, seed + e)) if ids),
                  "recipe.fineweb")
    web = packed(docs, n, eos)
    chat = packed((s.ids for s in longalign_sequences(recipe, fmt, causal=True)), n, eos)
    first, second = (web, chat) if seed % 2 else (chat, web)
    while True:
        yield next(first)
        yield next(second)


def loongrl_sequence(fmt: Formatter, row: dict, max_len: int) -> Sequence | None:
    """The prompt (BOS and its tail kept when too long), then the first gold answer alone."""
    prompt = row.get("prompt")
    messages = ([{"role": "user", "content": prompt.strip()}] if isinstance(prompt, str) else
                [{"role": str(m.get("role") or "user"), "content": str(m.get("content", "")).strip()}
                 for m in prompt or [] if isinstance(m, dict) and str(m.get("content", "")).strip()])
    truth = (row.get("reward_model") or {}).get("ground_truth", [])
    answers = [truth.strip()] if isinstance(truth, str) else [str(a).strip() for a in truth if str(a).strip()]
    if not messages or not answers:
        return None
    ids = fmt.prompt_ids(messages)
    answer = fmt.tok.encode(answers[0])
    if not answer or len(answer) >= max_len:
        return None
    budget = max_len - len(answer)
    if len(ids) > budget:
        ids = [ids[0]] + ids[len(ids) - budget + 1:] if budget > 1 else ids[-budget:]
    return Sequence(ids + answer, [IGNORE] * len(ids) + answer)


def gold_sft(recipe: TitanLlamaRecipe, stage: Stage, fmt: Formatter) -> Iterator[Sequence]:
    n, seed = recipe.sequence_length, recipe.data_seed
    loong = [s for s in (loongrl_sequence(fmt, r, n) for r in _first(source_rows(recipe.loongrl),
                                                                      stage.loongrl_examples)) if s is not None]
    chats = longalign_sequences(recipe, fmt, causal=False)
    while True:
        rng = random.Random(seed)  # the same schedule every pass, as the code's
        order = list(range(len(loong)))
        rng.shuffle(order)
        schedule = [0] * stage.longalign_examples + [1] * len(order)
        if not schedule:
            raise ValueError("gold_sft: no LongAlign rows asked for and no usable LoongRL row")
        rng.shuffle(schedule)
        picks = iter(order)
        for source in schedule:
            yield loong[next(picks)] if source else next(chats)


def quality_sequence(fmt: Formatter, article: str, q: dict, max_len: int) -> Sequence:
    from memexp.benchmarks.quality.benchmark import titan_sft_context, titan_sft_prompt

    query = titan_sft_prompt(q["question"], q["options"])  # what bench.prompt=titan_sft evaluates
    prompt = fmt.tok.encode(titan_sft_context(article) + query if article else query)
    answer = fmt.tok.encode(f" {LETTERS[int(q['gold_label']) - 1]}")
    prompt = prompt[-(max_len - len(answer)):]  # the tail: the question and its choices
    return Sequence(prompt + answer, [IGNORE] * len(prompt) + answer)


def quality_rows(src: Source) -> Iterator[dict]:
    """QuALITY's train file: the local copy, else bench=quality's cache / download."""
    if src.path is not None:
        yield from source_rows(src)
        return
    import memexp.benchmarks.quality.benchmark as quality
    from memexp.benchmarks import datasets as bench_data
    from memexp.benchmarks.quality.config import QualityConfig

    cfg = QualityConfig(split="train")
    root = bench_data.resolve(quality.NAME, None, cfg.cache_dir, lambda d: quality.fetch(cfg.url, d),
                              quality.local_path("train"))
    yield from file_rows(root / quality.file_name("train") if root.is_dir() else root)


def quality_sft(recipe: TitanLlamaRecipe, stage: Stage, fmt: Formatter) -> Iterator[Sequence]:
    rows = [(art["article"], q) for art in quality_rows(recipe.quality) for q in art.get("questions", [])
            if "gold_label" in q and len(q.get("options", [])) >= 2]
    if not rows:
        raise ValueError(f"recipe.quality: no question with gold_label and options in {recipe.quality.path or 'the train split'}")
    random.Random(QUALITY_SEED).shuffle(rows)
    produced = 0
    while produced < stage.quality_examples:
        for article, q in rows[: stage.quality_examples - produced]:
            yield quality_sequence(fmt, article, q, recipe.sequence_length)
            produced += 1


def stage_stream(recipe: TitanLlamaRecipe, stage: Stage, fmt: Formatter, extra: dict | None = None) -> Iterator[Sequence]:
    """The stage's sequences. `extra`: stage data a recipe built on this one brings, by name
    ((recipe, stage, fmt) -> sequences): tiny_titan's `niah` (memexp.embedded.tiny_titan)."""
    streams = {"pretrain_mix": lambda: pretrain_mix(recipe, fmt), "gold_sft": lambda: gold_sft(recipe, stage, fmt),
               "quality_sft": lambda: quality_sft(recipe, stage, fmt)}
    streams.update({name: (lambda make=make: make(recipe, stage, fmt)) for name, make in (extra or {}).items()})
    if stage.data not in streams:
        raise ConfigError(f"recipe.stages {stage.name}: data={stage.data} is recipe=tiny_titan's NIAH text; "
                          f"run recipe=tiny_titan, or choose one of {', '.join(streams)}")
    return streams[stage.data]()


def _first(rows: Iterator[dict], n: int) -> Iterator[dict]:
    for i, row in enumerate(rows):
        if i >= n:
            return
        yield row
