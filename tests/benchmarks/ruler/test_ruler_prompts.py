"""Exact inputs of every RULER task: seed 42, example 0, short lengths, byte tokenizer.

The texts follow RULER's templates word for word (singular wording for one query and one
value, a leading space where a needle lands at depth 0, a double space where two needles
share a cut), the essay split by Punkt ("Dr. Lee", "e.g. at", "U.S. market" stay whole).
"""

from __future__ import annotations

import pytest

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NIAH_HEAD = (
    "A special magic number is hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the number afterwards.\n"
)
NIAH_HEAD_UUID = NIAH_HEAD.replace("number", "uuid")
NIAH_HEAD_PLURAL = (
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the numbers afterwards.\n"
)
ESSAY_START = (
    "Most good ideas look bad at first. That is why they are still available. "
    "When Dr. Lee started her lab in 1998, nobody wanted to fund it. She kept going anyway. Was she right? "
    "Looking back, e.g. at the patents, it is hard to argue otherwise. The U.S. market took ten years to notice. "
    "Startups work the same way! A founder has to"
)
QA_HEAD = (
    "Answer the question based on the given documents. Only give me the answer and do not output any other words."
    "\n\nThe following are given documents.\n\n"
)
QA_TAIL = (
    "\n\nAnswer the question based on the given documents. Only give me the answer and do not output any other words."
    "\n\nQuestion: {} Answer:"
)


def singular_prompt(kind: str, key: str) -> str:
    return (
        f"\nWhat is the special magic {kind} for {key} mentioned in the provided text? "
        f"The special magic {kind} for {key} mentioned in the provided text is"
    )


def needle(key: str, value: str, kind: str = "numbers") -> str:
    return f"One of the special magic {kind} for {key} is: {value}."


def first_example(make_ruler, tokenizer, task: str, length: int, **fields):
    examples = make_ruler(tasks=[task], lengths=[length], num_samples=1, **fields).task_examples(task, length, tokenizer)
    return examples[0]


def test_niah_single_1(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "niah_single_1", 700)
    assert e.context == NIAH_HEAD + "\n".join([needle("juvenile-sustainment", "8798721"), NOISE, NOISE])
    assert e.questions[0].prompt == singular_prompt("number", "juvenile-sustainment")
    assert e.questions[0].references == ["8798721"]
    assert e.meta["tokens"] == 684


def test_niah_single_2_needle_at_depth_zero(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "niah_single_2", 800)
    words = ESSAY_START.split(" ")
    assert e.context == NIAH_HEAD + " " + needle("unusual-vixen", "4992637") + " " + " ".join(words[:60])
    assert e.questions[0].prompt == singular_prompt("number", "unusual-vixen")
    assert e.questions[0].references == ["4992637"]
    assert e.meta["needles"] == [{"key": "unusual-vixen", "value": "4992637", "depth": 5, "offset": 132}]


def test_niah_single_3(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "niah_single_3", 760)
    value = "781cf745-2046-4b13-9043-4bf7d23eb730"
    assert e.context == NIAH_HEAD_UUID + (
        "Most good ideas look bad at first. That is why they are still available. "
        + needle("abounding-ash", value, "uuids")
        + " When Dr. Lee started her lab in 1998, nobody wanted to fund it. She kept going anyway. Was she right? "
        "Looking back, e.g. at the patents, it is hard to argue otherwise. The U.S. market"
    )
    assert e.questions[0].prompt == singular_prompt("uuid", "abounding-ash")
    assert e.questions[0].references == [value]


def test_niah_multikey_1(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "niah_multikey_1", 1000)
    assert e.context == NIAH_HEAD + (
        "Most good ideas look bad at first. "
        + needle("high-pitched-neighbor", "1263878")
        + " That is why they are still available. "
        + needle("unsightly-mascara", "4844742")
        + " When Dr. Lee started her lab in 1998, nobody wanted to fund it. She kept going anyway. Was she right? "
        + needle("lush-bungalow", "6835253")
        + " Looking back, e.g. at the patents, it is hard to argue otherwise. "
        + needle("gleaming-ton", "2831550")
        + " The U.S. market took ten years to notice. Startups work the same way! A"
    )
    assert e.questions[0].prompt == singular_prompt("number", "gleaming-ton")
    assert e.questions[0].references == ["2831550"]
    assert e.meta["keys"] == ["gleaming-ton", "unsightly-mascara", "high-pitched-neighbor", "lush-bungalow"]
    assert [n["depth"] for n in e.meta["needles"]] == [10, 23, 54, 79]


def test_niah_multikey_2_needle_haystack(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "niah_multikey_2", 720)
    assert e.context == NIAH_HEAD + "\n".join(
        [
            needle("psychotic-defense", "5983983"),
            needle("forgetful-winter", "1445373"),
            needle("whimsical-dam", "3063621"),
            needle("temporary-plug", "6467071"),
        ]
    )
    assert e.questions[0].prompt == singular_prompt("number", "psychotic-defense")
    assert e.questions[0].references == ["5983983"]


def test_niah_multikey_3_uuid_keys(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "niah_multikey_3", 760)
    key, value = "298a7ac2-6f54-4194-8c8d-4286918f4a0c", "1f993837-0026-492b-a854-16df8a9d1af9"
    distractor = needle("676d145b-6c2e-412c-ad89-01e13071a1dc", "4aac5645-8b5b-4b9e-82af-ac099923f992", "uuids")
    assert e.context == NIAH_HEAD_UUID + needle(key, value, "uuids") + "\n" + distractor
    assert e.questions[0].prompt == singular_prompt("uuid", key)
    assert e.questions[0].references == [value]


def test_niah_multivalue_plural(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "niah_multivalue", 1000)
    assert e.context == NIAH_HEAD_PLURAL + (
        "Most good ideas look bad at first. "
        + needle("slow-spell", "9348029")
        + " That is why they are still available. "
        + needle("slow-spell", "8191410")
        + " When Dr. Lee started her lab in 1998, nobody wanted to fund it. "
        + needle("slow-spell", "3082844")
        + " She kept going anyway. Was she right? "
        + needle("slow-spell", "9919004")
        + " Looking back, e.g. at the patents, it is hard to argue otherwise. The U.S. market took ten years to notice. "
        "Startups work the same way! A founder has to"
    )
    assert e.questions[0].prompt == (
        "\nWhat are all the special magic numbers for slow-spell mentioned in the provided text? "
        "The special magic numbers for slow-spell mentioned in the provided text are"
    )
    assert e.questions[0].references == ["9919004", "8191410", "9348029", "3082844"]


def test_niah_multiquery_two_needles_in_one_cut(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "niah_multiquery", 1100)
    assert e.context == NIAH_HEAD_PLURAL + (
        "Most good ideas look bad at first. "
        + needle("voiceless-stamp", "4853771")
        + " That is why they are still available. "
        + needle("addicted-archer", "9698236")
        + " When Dr. Lee started her lab in 1998, nobody wanted to fund it. She kept going anyway. Was she right? "
        "Looking back, e.g. at the patents, it is hard to argue otherwise. "
        + needle("slippery-trail", "6020283")
        + "  "
        + needle("ugly-bonus", "9822657")
        + " The U.S. market took ten years to notice. Startups work the same"
    )
    query = "slippery-trail, ugly-bonus, voiceless-stamp, and addicted-archer"
    assert e.questions[0].prompt == (
        f"\nWhat are all the special magic numbers for {query} mentioned in the provided text? "
        f"The special magic numbers for {query} mentioned in the provided text are"
    )
    assert e.questions[0].references == ["6020283", "9822657", "4853771", "9698236"]


def test_variable_tracking(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "vt", 2000)
    head = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
    worked = (
        head
        + "\n".join(
            [
                "VAR JEI = 28518", NOISE, "VAR QQE = VAR JEI ", NOISE, "VAR OGK = VAR QQE ", NOISE,
                "VAR LAO = VAR OGK ", NOISE, "VAR CBE = VAR LAO ", NOISE,
            ]
        )
        + "\nQuestion: Find all variables that are assigned the value 28518 in the text above. Answer: According to "
        "the chain(s) of variable assignment in the text above, 5 variables are assigned the value 28518, they are:  "
        "JEI QQE OGK LAO CBE\n"
    )
    lines = [
        "VAR IAHZY = 40175", NOISE, NOISE, NOISE, "VAR XDCXN = VAR IAHZY ", NOISE, "VAR WTUAY = VAR XDCXN ", NOISE,
        "VAR HMDNO = VAR WTUAY ", NOISE, "VAR IQUQV = VAR HMDNO ", NOISE,
    ]
    assert e.context == worked + "\n" + head + "\n".join(lines)
    assert e.questions[0].prompt == (
        "\nQuestion: Find all variables that are assigned the value 40175 in the text above. Answer: According to "
        "the chain(s) of variable assignment in the text above, 5 variables are assigned the value 40175, they are: "
    )
    assert e.questions[0].references == ["IAHZY", "XDCXN", "WTUAY", "HMDNO", "IQUQV"]
    assert e.questions[0].max_new_tokens == 30
    for offset, name in zip(e.meta["statement_offsets"], e.questions[0].references):
        assert e.context[offset:].startswith(f"VAR {name} = ")


def numbered(words: str) -> str:
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(words.split()))


def test_common_words(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "cwe", 2200)
    head = (
        "Below is a numbered list of words. In these words, some appear more often than others. "
        "Memorize the ones that appear most often.\n"
    )
    question = "\nQuestion: What are the 10 most common words in the above list? Answer: The top 10 words that appear most often in the list are:"
    worked = (
        head
        + numbered(
            "pinot eleventh racer overview dogsled reference tender scientist reference leash scientist flap eleventh "
            "flap devise median unite overjoyed eleventh devise racer garment baby pinot pinot overjoyed chess protest "
            "devise racer witch regret dogsled overjoyed flap reference dogsled regret scientist regret"
        )
        + question
        + " "
        + numbered("racer scientist devise eleventh reference dogsled overjoyed regret flap pinot")
    )
    listed = numbered(
        "rugby circadian anklet hotel rugby railway railway colonial thirst humorous prick passive aboriginal dahlia "
        "railway phrasing fool railway prick thirst somersault hotel fulfillment teach passive lawyer hotel teach prick "
        "thirst rugby rebellion anklet elated prick anklet teach empowerment hotel rugby phrasing hiring apprehension "
        "prick railway teach phrasing prick vote hiring thirst railway roller personal merciful rugby viewer passive "
        "earplug hiring hotel passive teach hotel chug phrasing blackness anklet thirst balaclava aspiring rugby "
        "phrasing crewman testy hiring hiring crude passive birdhouse anklet phrasing teach passive thirst anklet "
        "hiring flare"
    )
    assert e.context == worked + "\n" + head + listed
    assert e.questions[0].prompt == question
    common = ["hotel", "passive", "prick", "anklet", "hiring", "thirst", "railway", "phrasing", "teach", "rugby"]
    assert e.questions[0].references == common
    # below 4096 tokens RULER repeats the common words 6 times and the others once
    assert all(e.context.count(f". {w} ") + e.context.endswith(f". {w}") == 6 for w in common)


def test_freq_words(make_ruler, tokenizer):
    e = first_example(make_ruler, tokenizer, "fwe", 600)
    assert e.context == (
        "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
        "appeared coded words. ... feukle ... fvyzfa feukle fvyzfa ... ... ... fvyzfa fvyzfa ... ... ... ... ... ... "
        "... ... jdywrn fvyzfa ... ... qabbgf ... ... ... feukle fvyzfa ... ... ... ... ... ... ... ... ..."
    )
    assert e.questions[0].prompt == (
        "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently "
        "appeared words in the above coded text? Answer: According to the coded text above, the three most "
        "frequently appeared words are:"
    )
    assert e.questions[0].references == ["fvyzfa", "feukle", "qabbgf"]
    assert e.questions[0].max_new_tokens == 50


def test_qa_squad_prefers_same_article_distractors(make_ruler, tokenizer, squad_path):
    e = first_example(make_ruler, tokenizer, "qa_1", 560, squad_path=squad_path)
    assert e.context == QA_HEAD + (
        "Document 1:\nThe Amazon carries more water than any other river.\n\n"
        "Document 2:\nThe Nile flows north into the Mediterranean.\n\n"
        "Document 3:\nEverest is the highest mountain above sea level."
    )
    assert e.questions[0].prompt == QA_TAIL.format("Where does the Nile flow?")
    assert e.questions[0].references == ["north", "into the Mediterranean"]
    assert e.questions[0].metric == "string_match_part"
    assert e.questions[0].max_new_tokens == 32
    assert e.meta["gold_documents"] == [2]


def test_qa_hotpotqa_all_ten_paragraphs_are_context(make_ruler, tokenizer, hotpotqa_path):
    e = first_example(make_ruler, tokenizer, "qa_2", 1000, hotpotqa_path=hotpotqa_path)
    order = ["08", "15", "07", "06", "13", "18", "05", "02", "09", "03", "04", "00", "01", "11"]
    documents = [f"Document {i + 1}:\nPage {p}\nFact {p} one. Fact {p} two." for i, p in enumerate(order)]
    assert e.context == QA_HEAD + "\n\n".join(documents)
    assert e.questions[0].prompt == QA_TAIL.format("Which city hosts the tower?")
    assert e.questions[0].references == ["Paris"]
    assert e.meta["gold_documents"] == [i + 1 for i, p in enumerate(order) if p.startswith("0")]


@pytest.mark.parametrize("task", ["niah_single_1", "niah_multivalue", "vt", "cwe", "fwe"])
def test_ids_length_and_metric(make_ruler, tokenizer, task):
    e = first_example(make_ruler, tokenizer, task, 2200)
    assert (e.id, e.task, e.length) == (f"{task}/2200/0", task, 2200)
    assert e.questions[0].id == f"{task}/2200/0/0"
    assert e.questions[0].metric == "string_match_all"


# Samples 1 and 2: NVIDIA/RULER niah.py generate_input_output(size) run with each sample's
# random state (random.setstate(sample_rng(task, 42, i).getstate())) and the size memexp fitted
# for that sample, its sent_tokenize being the Punkt splitter the tests above pin.
MULTIVALUE_LATER = [
    (56, "imperfect-ovary", NIAH_HEAD_PLURAL + " " + needle("imperfect-ovary", "8206295")
     + " Most good ideas look bad at first. That is why they are still available. When Dr. Lee started her lab in "
     "1998, nobody wanted to fund it. She kept going anyway. Was she right? Looking back, e.g. "
     + needle("imperfect-ovary", "2955295") + "  " + needle("imperfect-ovary", "7456444")
     + " at the patents, it is hard to argue otherwise. The U.S. market took ten years to notice. "
     + needle("imperfect-ovary", "4289990") + " Startups work"),
    (54, "boring-volatility", NIAH_HEAD_PLURAL + " " + needle("boring-volatility", "5312105")
     + " Most good ideas look bad at first. " + needle("boring-volatility", "6970864")
     + " That is why they are still available. When Dr. Lee started her lab in 1998, nobody wanted to fund it. "
     "She kept going anyway. " + needle("boring-volatility", "1268661") + " Was she right? Looking back, e.g. "
     + needle("boring-volatility", "5709864") + " at the patents, it is hard to argue otherwise. The U.S. market "
     "took ten years to notice."),
]


def test_niah_multivalue_later_samples_are_the_official_text_each_at_its_own_size(make_ruler, tokenizer):
    examples = make_ruler(tasks=["niah_multivalue"], lengths=[1000], num_samples=3).task_examples(
        "niah_multivalue", 1000, tokenizer)
    for e, (size, key, context) in zip(examples[1:], MULTIVALUE_LATER):
        assert e.meta["size"] == size
        assert e.context == context
        assert e.questions[0].prompt == (
            f"\nWhat are all the special magic numbers for {key} mentioned in the provided text? "
            f"The special magic numbers for {key} mentioned in the provided text are")


def test_niah_multikey_2_later_samples_draw_their_own_distractors(make_ruler, tokenizer):
    examples = make_ruler(tasks=["niah_multikey_2"], lengths=[720], num_samples=3).task_examples(
        "niah_multikey_2", 720, tokenizer)
    lines = [
        [("drab-rush", "9513223"), ("silly-neighbor", "6744603"), ("absurd-funeral", "3726323"),
         ("torpid-cappelletti", "3535506")],
        [("petite-selling", "4085814"), ("obedient-sermon", "2073794"), ("determined-boat", "2587264"),
         ("exuberant-copy", "8342164")],
    ]
    for e, sample_lines, key in zip(examples[1:], lines, ["drab-rush", "obedient-sermon"]):
        assert e.context == NIAH_HEAD + "\n".join(needle(k, v) for k, v in sample_lines)
        assert e.questions[0].prompt == singular_prompt("number", key)
