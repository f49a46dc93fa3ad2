"""With backbone.chat=true RULER's inputs are sized with the chat template inside the length, as
NVIDIA/RULER's prepare.py counts them: the synthetic generators format the model template around
the task template and require len(tokenize(template + answer prefix)) + tokens_to_generate <=
max_seq_length. The expected counts below tokenize the whole rendered input in one piece, the
way prepare.py does, not with memexp's split feed."""

from __future__ import annotations

import json
import shutil

import pytest

import memexp.run.runner as runner
from memexp.backbones.attention.model import build
from memexp.backbones.base import InputFeed
from memexp.benchmarks.ruler.benchmark import Ruler
from memexp.benchmarks.ruler.config import RulerConfig
from memexp.core.compose import load_config
from memexp.core.schema import ASSETS_DIR, BackboneConfig

# Llama-3-Instruct's template in its shape (header, end of turn, assistant header)
TEMPLATE = ("<s>{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
            "{{ m.content }}<|eot_id|>{%- endfor %}"
            "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
LENGTH, NEW = 1024, 16
TASKS = ["niah_single_1", "niah_multikey_1"]


@pytest.fixture(scope="module")
def chat_checkpoint(tmp_path_factory):
    """The tiny Llama asset with a chat template in its tokenizer_config.json."""
    folder = tmp_path_factory.mktemp("chat_llama")
    for f in (ASSETS_DIR / "tiny_llama_niah").iterdir():
        shutil.copy(f, folder / f.name)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": TEMPLATE}))
    return folder


@pytest.fixture(scope="module")
def backbone(chat_checkpoint):
    return build(BackboneConfig(name="chat_llama", arch="llama", pretrained=str(chat_checkpoint), device="cpu"))


def official_tokens(backbone, question, context: str) -> int:
    """prepare.py's count: the whole templated input with its answer prefix in one tokenization."""
    text = backbone.chat_prompt(context + question.user_prompt) + question.answer_prefix
    return len(backbone.tokenizer.encode(text)) + question.max_new_tokens


def ruler(tmp_path) -> Ruler:
    return Ruler(RulerConfig(tasks=TASKS, lengths=[LENGTH], num_samples=3, max_new_tokens=NEW, essay_standin=True,
                             cache_dir=str(tmp_path / "cache")))


def test_the_template_really_adds_tokens(backbone):
    assert backbone.chat_template is not None
    assert len(backbone.tokenizer.encode(backbone.chat_prompt("x"))) > 40


def test_with_chat_every_input_fits_its_length_with_the_template_inside(backbone, tmp_path):
    bench = ruler(tmp_path)
    bench.size_with(InputFeed(backbone, chat=True))
    for ex in bench.examples(backbone.tokenizer):
        tokens = official_tokens(backbone, ex.questions[0], ex.context)
        # within one haystack unit (a noise sentence, < 100 byte tokens) of the length, never over it
        assert LENGTH - 100 < tokens <= LENGTH, ex.id
        assert ex.meta["tokens"] == tokens


def test_without_the_chat_feed_the_same_inputs_run_over_the_length(backbone, tmp_path):
    """The bug: sized without the template, every templated input is longer than asked."""
    for ex in ruler(tmp_path).examples(backbone.tokenizer):
        assert official_tokens(backbone, ex.questions[0], ex.context) > LENGTH, ex.id


def test_chat_and_plain_examples_are_cached_apart(backbone, tmp_path):
    plain = ruler(tmp_path)
    plain_ex = next(iter(plain.examples(backbone.tokenizer)))
    chat = ruler(tmp_path)
    chat.size_with(InputFeed(backbone, chat=True))
    chat_ex = next(iter(chat.examples(backbone.tokenizer)))
    assert len(chat_ex.context) < len(plain_ex.context)  # the template took room from the haystack
    assert len(list((tmp_path / "cache").rglob("*.json*"))) >= 2


def test_the_runner_sizes_ruler_with_the_backbones_chat_template(chat_checkpoint, tmp_path, monkeypatch):
    """End to end: backbone.chat=true; what the method is fed (context + question) plus the
    generation budget is within the length."""
    cfg = load_config([f"backbone.pretrained={chat_checkpoint}", "backbone.arch=llama", "backbone.name=chat_llama",
                       "backbone.chat=true", "backbone.device=cpu", "method=plain", "bench=ruler",
                       "bench.tasks=[niah_single_1]", f"bench.lengths=[{LENGTH}]", "bench.num_samples=2",
                       f"bench.max_new_tokens={NEW}", "bench.essay_standin=true",
                       f"bench.cache_dir={tmp_path / 'cache'}", f"output_dir={tmp_path / 'runs'}", "progress=false"])
    runner.run(cfg)
    records = [json.loads(line) for f in (tmp_path / "runs").rglob("records.jsonl") for line in f.read_text().splitlines()]
    assert len(records) == 2
    for rec in records:
        assert LENGTH - 100 < rec["tokens"]["context"] + rec["tokens"]["question"] + NEW <= LENGTH
