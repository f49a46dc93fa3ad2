"""scripts/probe/uuid_copy_ambiguity.py: a context is ambiguous when two different tokens follow it."""

from script_module import load_script


def test_ambiguity_by_hand():
    ambiguous = load_script("uuid_copy_ambiguity").ambiguous
    tokens = ["a", "-", "b", "c", "-", "d"]  # "-" is followed by "b" and by "d"
    assert ambiguous(tokens, 1)
    assert not ambiguous(tokens, 2)  # ("a", "-") and ("c", "-") each occur once
    assert not ambiguous(["a", "b", "a", "b"], 1)  # a repeat followed by the same token is no ambiguity
    assert ambiguous(["x", "a", "b", "y", "a", "b", "z"], 2) and not ambiguous(["x", "a", "b", "y", "a", "b", "z"], 3)
    assert not ambiguous(["a"], 1) and not ambiguous([], 2)
