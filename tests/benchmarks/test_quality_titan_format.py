"""bench.prompt=titan_sft: QuALITY in the format the Titan-Llama authors fine-tuned in.

The expected strings are written from the authors' data code (sarahpannn/titans-pytorch at
c60b4efa, sft_kvwrite_quality_mc.py, QualityMCSFTDataset._build), not from memexp's:
    choices = "\\n".join(f"{OPTION_LABELS[i]}. {o.strip()}" for i, o in enumerate(q['options']))
    query = f"Question: {q['question']}\\nChoices:\\n{choices}\\nAnswer:"
    prompt = f"{article}\\n\\n{query}"
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)      # no BOS
    ans_ids = tokenizer.encode(f" {OPTION_LABELS[gold_label - 1]}", ...)  # the target " X"
"""

import json

import memexp.run.runner as runner
from memexp.benchmarks.quality.benchmark import Quality, file_name
from memexp.benchmarks.quality.config import QualityConfig
from memexp.core.compose import load_config
from memexp.core.types import Question
from memexp.methods.plain.method import Plain

ARTICLE = "THE LAST SHIP\n\nThe ship left at dawn.  It was cold.\n"
QUESTION = {"question": "Why did the ship leave at dawn? ", "options": [" Because of the tide", "To escape the war ",
                                                                         "For trade", "No reason at all"],
            "gold_label": 2, "writer_label": 2, "difficult": 0}
# the authors' prompt for this row, byte for byte: article as is, options stripped, question as is
EXPECTED = ("THE LAST SHIP\n\nThe ship left at dawn.  It was cold.\n\n\n"
            "Question: Why did the ship leave at dawn? \n"
            "Choices:\n"
            "A. Because of the tide\n"
            "B. To escape the war\n"
            "C. For trade\n"
            "D. No reason at all\n"
            "Answer:")


def row(article_id="A1", questions=(QUESTION,)):
    """One line of QuALITY.v1.0.1.htmlstripped.<split> (the file both the authors and memexp read)."""
    return {"article_id": article_id, "set_unique_id": f"{article_id}_w1", "batch_num": "1", "writer_id": "w1",
            "source": "Gutenberg", "title": "The Last Ship", "author": "A", "topic": "", "url": "", "year": "1950",
            "license": "", "article": ARTICLE, "questions": list(questions)}


def write(folder, rows, split="dev"):
    (folder / file_name(split)).write_text("".join(json.dumps(r) + "\n" for r in rows))


def titan_quality(tmp_path, **fields) -> Quality:
    return Quality(QualityConfig(data_path=str(tmp_path), prompt="titan_sft", **fields))


def test_context_plus_question_is_the_authors_prompt_byte_for_byte(tmp_path):
    from memexp.backbones.tokenizer import ByteTokenizer

    write(tmp_path, [row()])
    ex = next(titan_quality(tmp_path).examples(ByteTokenizer()))
    q = ex.questions[0]
    assert ex.context + q.prompt == EXPECTED
    assert q.references == ["B"] and q.max_new_tokens == 1
    assert not ex.bos and not q.chat_template  # no BOS, no chat template: as trained


def test_the_runner_feeds_the_authors_ids_without_bos(tmp_path, monkeypatch):
    """What the method reads is `tokenizer.encode(prompt, add_special_tokens=False)` of the
    authors' prompt, split where the question starts; one token is generated."""
    seen = {}

    class Recorder(Plain):
        def read(self, backbone, context_ids):
            seen["context"] = list(context_ids)
            return super().read(backbone, context_ids)

        def answer(self, backbone, memory, question_ids, question, stop=None):
            seen["question"], seen["budget"] = list(question_ids), question.max_new_tokens
            return super().answer(backbone, memory, question_ids, question, stop)

    write(tmp_path, [row()])
    monkeypatch.setattr("memexp.methods.build_method", lambda cfg: Recorder())
    cfg = load_config(["backbone=tiny_gdn_random", "backbone.chat=true", "method=plain", "bench=quality",
                       "bench.prompt=titan_sft", f"bench.data_path={tmp_path}", f"output_dir={tmp_path / 'runs'}",
                       "progress=false"])
    runner.run(cfg)
    from memexp.backbones import load_backbone

    tok = load_backbone("tiny_gdn_random").tokenizer
    assert seen["context"] + seen["question"] == tok.encode(EXPECTED)
    assert seen["context"][0] != tok.bos_id and seen["budget"] == 1


def test_scored_as_the_authors_accuracy_the_one_token_is_exactly_the_target():
    """Their `correct` (titan_llama.py at c60b4efa) is argmax(logits) == the label id of " B": only
    the token whose text is " B" counts; "B" without the space, " B." or " Both" are other tokens."""
    q = Question(id="0", prompt="Answer:", references=["B"], metric="accuracy", max_new_tokens=1)
    bench = Quality(QualityConfig(prompt="titan_sft"))
    assert bench.score(" B", q) == 100.0
    for other in ("B", " B.", "  B", " B ", " Both", " A", " b", "", " The answer is B"):
        assert bench.score(other, q) == 0.0, other


def test_a_stub_whose_first_token_is_B_without_the_space_is_wrong(tmp_path, monkeypatch):
    """Through the runner: a method that answers the token "B" (the byte tokenizer's id 66, not the
    trained " B") scores 0 on a question whose gold letter is B."""
    from memexp.methods.base import Answer

    class SaysB(Plain):
        def answer(self, backbone, memory, question_ids, question, stop=None):
            return Answer(ids=backbone.tokenizer.encode("B"), seconds={}, stats={}, tokens={"generated": 1})

    write(tmp_path, [row()])
    monkeypatch.setattr("memexp.methods.build_method", lambda cfg: SaysB())
    cfg = load_config(["backbone=tiny_gdn_random", "method=plain", "bench=quality", "bench.prompt=titan_sft",
                       f"bench.data_path={tmp_path}", f"output_dir={tmp_path / 'runs'}", "progress=false"])
    runner.run(cfg)
    records = [json.loads(line) for f in (tmp_path / "runs").rglob("records.jsonl") for line in f.read_text().splitlines()]
    assert [(r["prediction"], r["score"]) for r in records] == [("B", 0.0)]


def test_titan_sft_generates_one_token_only():
    import pytest

    from memexp.core.schema import ConfigError

    with pytest.raises(ConfigError, match=r"^bench.max_new_tokens=3: bench.prompt=titan_sft scores the one generated "
                                          r"token.*allowed values are 1$"):
        QualityConfig(prompt="titan_sft", max_new_tokens=3)


def test_zeroscrolls_stays_the_default_with_its_budget(tmp_path):
    from memexp.backbones.tokenizer import ByteTokenizer

    write(tmp_path, [row()])
    ex = next(Quality(QualityConfig(data_path=str(tmp_path))).examples(ByteTokenizer()))
    assert ex.bos and ex.context.startswith("You are provided a story") and ex.questions[0].max_new_tokens == 10
    assert QualityConfig(max_new_tokens=3).max_new_tokens == 3


def test_an_unknown_prompt_is_one_line():
    import pytest

    from memexp.core.schema import ConfigError

    with pytest.raises(ConfigError, match=r"^bench.prompt='titan': allowed values are zeroscrolls, titan_sft$"):
        QualityConfig(prompt="titan")
