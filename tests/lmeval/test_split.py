"""The context / question cut of an lm-eval prompt (memexp.lmeval.split): pure string logic,
checked against cuts written out by hand."""

import pytest

from memexp.core.schema import ConfigError
from memexp.lmeval.split import check_split, split_prompt

RULER_INPUT = "Some magic numbers are hidden.\nline one\nline two\nWhat is the number for k?"
RULER_PROMPT = RULER_INPUT + " The number for k is"  # lm-eval appends gen_prefix with a space


def test_last_line_keeps_the_newline_with_the_question():
    context, question = split_prompt(RULER_PROMPT, {}, "last_line", "t")
    assert context == "Some magic numbers are hidden.\nline one\nline two"
    assert question == "\nWhat is the number for k? The number for k is"


def test_doc_field_cuts_right_after_the_fields_text():
    doc = {"context": "PASSAGES", "question": "Who?"}
    prompt = "Read these.\nPASSAGES\n\nQuestion: Who?\nAnswer:"
    assert split_prompt(prompt, doc, "doc_field:context", "t") == ("Read these.\nPASSAGES", "\n\nQuestion: Who?\nAnswer:")


def test_none_shares_nothing():
    assert split_prompt("a\nb", {}, "none", "t") == ("", "a\nb")


def test_auto_prefers_the_context_field():
    doc = {"context": "line one", "input": RULER_INPUT}
    assert split_prompt(RULER_PROMPT, doc, "auto", "t") == ("Some magic numbers are hidden.\nline one",
                                                            "\nline two\nWhat is the number for k? The number for k is")


def test_auto_takes_the_last_line_of_a_single_field_prompt():
    doc = {"input": RULER_INPUT, "outputs": ["1"]}
    assert split_prompt(RULER_PROMPT, doc, "auto", "t") == split_prompt(RULER_PROMPT, doc, "last_line", "t")


def test_auto_names_the_task_when_it_cannot_tell():
    # a template that builds the prompt from several fields and has no `context` field
    doc = {"passage": "P", "query": "Q"}
    with pytest.raises(ConfigError, match="task my_task: cannot tell its context from its question.*split="):
        split_prompt("Passage: P\nQuery: Q\nAnswer:", doc, "auto", "my_task")


@pytest.mark.parametrize("split, doc, match", [
    ("doc_field:passage", {"passage": 3}, "no text field 'passage'"),
    ("doc_field:passage", {"passage": "rewritten"}, "does not contain"),
    ("last_line", {}, "one line"),
])
def test_explicit_split_errors_name_the_task(split, doc, match):
    with pytest.raises(ConfigError, match=f"task t2: .*{match}"):
        split_prompt("one line prompt", doc, split, "t2")


@pytest.mark.parametrize("split", ["auto", "last_line", "none", "doc_field:context"])
def test_allowed_splits(split):
    check_split(split)


@pytest.mark.parametrize("split", ["lastline", "doc_field:", "doc_field"])
def test_a_wrong_split_is_one_line_naming_the_allowed(split):
    with pytest.raises(ConfigError, match=r"split=.*allowed values are auto, last_line, none, doc_field:<name>"):
        check_split(split)
