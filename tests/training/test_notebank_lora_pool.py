"""The notebank_lora recipe's NQ pool from rows in the collection's real layout.

emozilla/Long-Data-Collections-Fine-Tune's card lists three string columns, text, prompt and
completion (a Parquet copy of togethercomputer/Long-Data-Collections' fine-tune split). Public code
that reads its natural_questions_10_200_docs rows shows their content: the prompt is the instruction,
"Document [i](Title: ...) ..." passages and "Question: ..."; the completion is "Answer: <short>\\n
Long Answer: <gold passage text>\\nGold Document ID: <i>"; text is both. The fixture below is written
in that layout (a BookSum row beside them), and the expected parse is written from it by hand."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memexp.training.notebank_lora.data import PAPER_COUNTS, nq_draw, parse_nq
from memexp.training.notebank_lora.recipe import DataConfig

INSTRUCTION = ("Write a high-quality answer for the given question using only the provided search results (some of "
               "which might be irrelevant).")


def nq_row(question: str, docs: list[tuple[str, str]], answer: str, long_answer: str, gold: int) -> dict:
    documents = "\n".join(f"Document [{i + 1}](Title: {title}) {body}" for i, (title, body) in enumerate(docs))
    prompt = f"{INSTRUCTION}\n\n{documents}\n\nQuestion: {question}\n"
    completion = f"Answer: {answer}\nLong Answer: {long_answer}\nGold Document ID: {gold}"
    return {"text": prompt + completion, "prompt": prompt, "completion": completion}


FILLER = "The river runs past the old mill and the market square. " * 3  # 165 characters
ROWS = [
    # 0: the answer string is in the context
    nq_row("who built the mill", [("Mill", FILLER + "It was built by Ada Brook."), ("Town", FILLER)],
           "Ada Brook", "It was built by Ada Brook.", 1),
    # 1: the answer string is not, but the gold document (2) is: a gold-passage match
    nq_row("when did the bridge open", [("River", FILLER), ("Bridge", FILLER + "Opened in the spring of 1888.")],
           "1888 spring", "Opened in the spring of 1888.", 2),
    # 2: neither: the gold document (9) lies beyond the 600-character cap -> no-support
    nq_row("who painted the gate", [(f"D{k}", FILLER) for k in range(8)] + [("Gate", "Painted by Lin Oh.")],
           "Lin Oh", "Painted by Lin Oh.", 9),
    # 3: a 25-word answer: filtered out
    nq_row("what is the long one", [("A", FILLER)], " ".join(["word"] * 25), "x", 1),
    # 4: BookSum: no documents, another source
    {"text": "Chapter 1 ...\n\nQ: Can you write an appropriate summary?\nA: A summary.",
     "prompt": "Chapter 1 ...\n\nQ: Can you write an appropriate summary?\nA:", "completion": " A summary."},
    # 5: another no-support example (its answer appears nowhere, its gold document is cut)
    nq_row("where is the well", [(f"E{k}", FILLER) for k in range(6)] + [("Well", "Behind the inn.")],
           "behind the inn", "Behind the inn.", 7),
]
D = DataConfig(max_context_chars=600, examples=3, heldout=5)


def test_a_row_parses_into_context_question_short_answer_and_support():
    ex = parse_nq(ROWS[0], D, "r0")
    assert ex.question == "who built the mill"
    assert ex.answer == "Ada Brook"  # not the long answer, not the gold id
    assert ex.context.startswith(INSTRUCTION) and ex.context.endswith("It was built by Ada Brook.\nDocument [2](Title: Town) "
                                                                      + FILLER.strip())
    assert "Question:" not in ex.context and "Long Answer" not in ex.context
    assert (ex.support, ex.answerable) == ("answer", True)
    gold = parse_nq(ROWS[1], D, "r1")
    assert (gold.answer, gold.support, gold.answerable) == ("1888 spring", "gold", True)
    cut = parse_nq(ROWS[2], D, "r2")
    assert (cut.answer, cut.support, cut.answerable) == ("Lin Oh", "none", False)
    assert len(cut.context) <= 600 and "Document [9]" not in cut.context
    assert parse_nq(ROWS[3], D, "r3") is None and parse_nq(ROWS[4], D, "r4") is None


def test_the_text_column_alone_parses_the_same():
    for i in (0, 1, 2):
        both = parse_nq(ROWS[i], D, "r")
        text_only = parse_nq({"text": ROWS[i]["text"]}, D, "r")
        assert text_only == both


def test_pool_counts_and_draw_from_a_parquet_file_in_the_collections_layout(tmp_path):
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    result = nq_draw(D, str(path))
    assert [e.id.split(":")[1] for e in result.pool] == ["0", "1", "2", "5"]  # file order, filtered
    c = result.counts()
    assert (c["pool"], c["pool_answerable"], c["pool_no_support"], c["pool_gold_only"]) == (4, 2, 2, 1)
    assert c["drawn"] == 3 and c["drawn_answerable"] + c["drawn_no_support"] == 3
    # the held-out set: no-support examples of the shuffled pool after the drawn ones
    drawn_ids = {e.id for e in result.drawn}
    assert all(not e.answerable and e.id not in drawn_ids for e in result.heldout)
    assert len(result.heldout) == 2 - c["drawn_no_support"]
    line = result.summary()
    assert line.startswith("NQ pool 4 = 2 answerable + 2 no-support (paper 5,855 = 4,157 + 1,698); drawn 3 = ")
    assert PAPER_COUNTS["drawn_no_support"] == 678 and "(paper 2,400 = 1,722 + 678)" in line


def test_a_row_without_the_columns_or_text_is_one_line(tmp_path):
    from memexp.core.schema import ConfigError

    (tmp_path / "x.jsonl").write_text(json.dumps({"body": "nothing"}) + "\n")
    with pytest.raises(ConfigError) as e:
        nq_draw(D, str(tmp_path / "x.jsonl"))
    assert "\n" not in str(e.value) and "'prompt' and 'completion'" in str(e.value)


def test_the_recipe_prints_and_records_the_pool_and_the_diagnostic_command_reads_the_held_out_set(tmp_path, capsys):
    from test_notebank_lora_recipe import run

    from memexp.cli.notebank_lora_diagnose import main as diagnose
    from memexp.cli.train import load_recipe

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    data = ["data.source=nq", f"data_path={path}", "data.max_context_chars=600", "data.examples=2", "data.heldout=5"]
    recipe = load_recipe(["recipe=notebank_lora", "backbone=tiny_gdn", f"output={tmp_path / 'adapter'}", *data,
                          "steps=2", "accumulate=1", "checkpoint_every=10", "log_every=100", "threads=1"])[0]
    lines = []
    record = run(recipe, log=lines.append)
    want = nq_draw(recipe.data, str(path))
    assert record["pool"] == want.counts() and record["pool"]["pool"] == 4
    assert want.summary() in lines
    saved = json.loads((tmp_path / "adapter" / "notebank_lora.json").read_text())
    assert saved["pool"] == want.counts()

    assert diagnose(["backbone=tiny_gdn", *data, f"adapter={tmp_path / 'adapter'}"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["heldout"] == len(want.heldout) > 0
    assert out["nll_base"] > 0 and out["nll_adapter"] > 0
    assert json.loads((tmp_path / "adapter" / "heldout_diagnostics.json").read_text()) == out
    assert diagnose(["backbone=tiny_gdn", "data.source=ruler"]) == 2
    assert "the held-out diagnostic set is NQ's" in capsys.readouterr().err
