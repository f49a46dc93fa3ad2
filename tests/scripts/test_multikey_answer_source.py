"""scripts/probe/multikey_answer_source.py: where a prediction's value came from, on contexts written here."""

from script_module import load_script

CONTEXT = ("The grass is green. One of the special magic numbers for weak-harp is: 6136430. The sky is blue. "
           "One of the special magic numbers for belligerent-defender is: 2298613. "
           "One of the special magic uuids for tame-owl is: 0c5e1b2a-4f3d-4c2b-9a1e-7d6f5e4c3b2a. The sun is yellow.")


def test_needles_are_found_with_their_keys_and_values():
    found = load_script("multikey_answer_source").needle_pattern().findall(CONTEXT)
    assert found == [("weak-harp", "6136430"), ("belligerent-defender", "2298613"),
                     ("tame-owl", "0c5e1b2a-4f3d-4c2b-9a1e-7d6f5e4c3b2a")]


def test_each_source_by_hand():
    source = load_script("multikey_answer_source").answer_source
    assert source(CONTEXT, "2298613.", ["2298613"]) == "asked"  # the asked value, though not the first
    assert source(CONTEXT, "6136430.", ["2298613"]) == "first needle"
    assert source(CONTEXT, "0c5e1b2a-4f3d-4c2b-9a1e-7d6f5e4c3b2a", ["2298613"]) == "other needle"
    assert source(CONTEXT, "1234567.", ["2298613"]) == "no needle"
    # string_match_all: every reference, or it is not the asked answer
    assert source(CONTEXT, "6136430, 2298613", ["6136430", "2298613"]) == "asked"
    assert source(CONTEXT, "6136430", ["2298613", "6136430"]) == "first needle"
