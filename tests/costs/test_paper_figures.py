"""`memexp cost` against the NoteBank paper's own figures (App. C.6-C.7, App. D.1 Fig. 7, Table 7),
each within 1 % at the counts the paper records, and what it prints about where each count came from.

Every expected value below is a number printed in the paper, never one computed by memexp. The
paper records these counts for GDN at the 1M target (Eq. 18): P = T + |Q| = 1,048,019 input
tokens, N_T = 4092.3 notes, U = 232,514 archived tokens, M_helper = 0.402 MiB. It prints no |Q|,
|R| or |Y|: |Q| = 41.8 and |R| = 107.2 are the values its own GDN figures imply through Eqs. 13 and
15 (1.09 GFLOPs routing, 0.722 TFLOPs added; memexp/costs/report.py shows the arithmetic), so the
GDN routing check tests J, d_rho and Eq. 15, not an independent |Q|. For GDN-2 and Mamba-2 the
paper prints the routing figures only (1.72 and 0.50 GFLOPs) and none of their counts: with GDN's
counts they come out 5.0 % below and 8.9 % above it (pinned below, with the |Q| each figure
would need), so those two are not reproduced within 1 %.
"""

import json
from dataclasses import asdict

import pytest

from memexp.cli.main import main
from memexp.core.compose import load_config
from memexp.run.records import RunFolder

MIB = 2**20
# Eq. 18's P minus the implied |Q|: T = 1,048,019 - 41.8, as an integer count of context tokens
PAPER_T = 1_047_977
PAPER_COUNTS = ["--question-tokens=41.8", "--replay-tokens", "107.2", "--notes=4092.3", "--archived-tokens=232514",
                "--helper-mib=0.402", "--output-tokens=128"]


def cost(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["cost", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_gdn_reproduces_app_c6_c7_at_the_recorded_counts(capsys):
    """App. C.6: Plain 2891.4 and added 0.722 TFLOPs, 0.025 %; App. D.1: routing 1.09 GFLOPs;
    App. C.7: recurrent 48, conv 1.125 and archive 24.959 MiB, total 74.49 MiB (Eq. 21), MHA
    196,503.5 MiB and 2638x; Table 7: host archive 0.98 MiB."""
    r = cost(capsys, "backbone=gdn", f"length={PAPER_T}", *PAPER_COUNTS)
    f, s, a = r["flops"], r["storage"], r["storage"]["archive"]
    assert f["plain"] == pytest.approx(2891.4e12, rel=0.01)
    assert f["added"]["total"] == pytest.approx(0.722e12, rel=0.01)
    assert f["added_ratio_percent"] == pytest.approx(0.025, rel=0.01)
    assert f["added"]["route"] == pytest.approx(1.09e9, rel=0.01)
    assert s["state"]["recurrent"] / MIB == pytest.approx(48, rel=0.01)
    assert s["state"]["conv"] / MIB == pytest.approx(1.125, rel=0.01)
    assert (a["device_addresses"] + a["host_token_ids"] + a["host_metadata"]) / MIB == pytest.approx(24.959, rel=0.01)
    assert (a["host_token_ids"] + a["host_metadata"]) / MIB == pytest.approx(0.98, rel=0.01)
    assert s["total"] / MIB == pytest.approx(74.49, rel=0.01)
    assert s["mha_kv_cache"] / MIB == pytest.approx(196_503.5, rel=0.01)
    assert s["mha_over_total"] == pytest.approx(2638, rel=0.01)
    assert r["inputs"]["assumed"] == [] and set(r["inputs"]["basis"].values()) == {"given"}


# Eq. 15 written out, 2 |Q| N_T J d_rho + 3 (|Q| + N_T) J d_rho, at the shapes the paper states
# (App. C.1: GDN-2 18 x 16 = 288 channels, Mamba-2 48; App. C.3: d_rho = 16, C = 512 / 256, W = 2)
def eq15(q: float, notes: float, channels: int) -> float:
    return (2 * q * notes + 3 * (q + notes)) * channels * 16


def test_gdn2_routing_is_5_percent_below_the_paper_at_gdns_counts(capsys):
    """Fig. 7: 1.72 GFLOPs. The paper records no GDN-2 counts; at GDN's (|Q| = 41.8, N_T = 4092.3:
    same C and W, both count every complete chunk's two notes) Eq. 15 gives 1.634 GFLOPs, 5.0 %
    below. Not reproducible within 1 %: 1.72 would need |Q| = 44.1 at 4092.3 notes, a question
    length the paper does not state (GDN-2 reads with TinyLlama's tokenizer, GDN with its own)."""
    r = cost(capsys, "backbone=gdn2", f"length={PAPER_T}", "--question-tokens=41.8", "--notes=4092.3")
    route = r["flops"]["added"]["route"]
    assert route == pytest.approx(eq15(41.8, 4092.3, 288), rel=1e-12)
    assert route / 1.72e9 - 1 == pytest.approx(-0.050, abs=0.001)
    assert eq15(44.1, 4092.3, 288) == pytest.approx(1.72e9, rel=0.001)  # the |Q| that 1.72 implies


def test_mamba2_routing_is_9_percent_above_the_paper_at_the_note_bound(capsys):
    """Fig. 7: 0.50 GFLOPs. The paper records no Mamba-2 counts; at GDN's |Q| = 41.8 and T, and
    the note bound W floor(T/C) = 2 x floor(1,047,977 / 256) = 8,186 (C = 256), Eq. 15 gives
    0.5445 GFLOPs, 8.9 % above. Not reproducible within 1 %: 0.50 would need |Q| = 38.26 at 8,186
    notes (GPT-NeoX's tokenizer), which the paper does not state."""
    r = cost(capsys, "backbone=mamba2", f"length={PAPER_T}", "--question-tokens=41.8")
    assert r["inputs"]["notes"] == 8186 and r["inputs"]["basis"]["notes"].startswith("bound: W·floor(T/C)")
    route = r["flops"]["added"]["route"]
    assert route == pytest.approx(eq15(41.8, 8186, 48), rel=1e-12)
    assert route / 0.50e9 - 1 == pytest.approx(0.089, abs=0.001)
    assert eq15(38.26, 8186, 48) == pytest.approx(0.50e9, rel=0.001)


@pytest.mark.parametrize("backbone,route", [("gdn", eq15(42, 4096, 192)), ("gdn2", eq15(42, 4096, 288)),
                                            ("mamba2", eq15(42, 8192, 48))])
def test_default_routing_at_1m_is_pinned(capsys, backbone, route):
    """`memexp cost backbone=<b> length=1048576` with nothing given: |Q| = 42 assumed for every
    tokenizer, N_T at its bound (1.095, 1.643 and 0.547 GFLOPs), each labelled so."""
    r = cost(capsys, f"backbone={backbone}", "length=1048576")
    assert r["flops"]["added"]["route"] == route
    basis = r["inputs"]["basis"]
    assert basis["question"].startswith("assumed") and basis["notes"].startswith("bound")
    assert basis["replay"] == "bound: R·B = 2·64"


def test_notes_bound_counts_complete_chunks_only(capsys):
    """Eq. 7: a chunk writes once it holds C tokens, so T = 1000 at C = 512 writes one chunk's
    W = 2 notes (a real tiny_gdn_words run of 845 context tokens records write_chunks 1, notes 2);
    method.write_tail=true writes the incomplete last chunk too."""
    assert cost(capsys, "backbone=gdn", "length=1000")["inputs"]["notes"] == 2
    tail = cost(capsys, "backbone=gdn", "length=1000", "method.write_tail=true")["inputs"]
    assert tail["notes"] == 4 and tail["basis"]["notes"] == "bound: W·ceil(T/C) = 2·2"


def test_the_table_says_beside_each_figure_what_it_used(capsys):
    capsys.readouterr()
    assert main(["cost", "backbone=gdn", "length=1048576", "replay_tokens=107"]) == 0
    rows = {line[:36].strip(): line[36:] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert rows["|R|"] == "107 (given)"
    assert rows["N_T"] == "4,096 (bound: W·floor(T/C) = 2·2,048)"
    assert rows["|Q|"].startswith("42 (assumed: the paper's GDN questions")
    assert rows["added FLOPs ratio (Eq. 16)"].endswith("[|Q| 42 assumed, |Y| 128 assumed, |R| 107 given, "
                                                       "N_T 4,096 bound]")
    assert rows["added: route"].endswith("[|Q| 42 assumed, N_T 4,096 bound]")
    assert "M_helper memexp's own" in rows["persistent storage (Eq. 20)"]


def refused(capsys, *args: str) -> str:
    """The one line `memexp cost` stops with (exit status 2)."""
    capsys.readouterr()
    assert main(["cost", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    return err.strip()


def write_run(folder, records: list[dict]) -> None:
    """A run folder as the runner leaves it: config.yaml and records.jsonl (NoteBank on GDN)."""
    cfg = load_config(["backbone=gdn", "method=notebank"])
    RunFolder(folder).prepare(asdict(cfg))
    lines = [json.dumps({"example_id": str(k), "question_id": "0", "task": "niah_single_1", "length": r.pop("length"),
                         "score": 100.0, "tokens": r, "method_stats": {"notes": r.pop("notes"),
                                                                        "archived_tokens": r.pop("archived")}})
             for k, r in enumerate(records)]
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n")


def test_a_run_folder_gives_its_records_means(capsys, tmp_path):
    """`memexp cost RUN_FOLDER`: the run's config at its records' mean |Q|, |Y|, |R|, N_T and U,
    each labelled measured; a given option wins and is labelled given."""
    recs = [{"length": 1048576, "context": PAPER_T, "question": 41, "replay": 100, "generated": 128, "notes": 4092,
             "archived": 232_000},
            {"length": 1048576, "context": PAPER_T, "question": 43, "replay": 114, "generated": 128, "notes": 4094,
             "archived": 233_028}]
    write_run(tmp_path, recs)
    measured = cost(capsys, str(tmp_path))
    given = cost(capsys, "backbone=gdn", f"length={PAPER_T}", "--question-tokens=42", "--replay-tokens=107",
                 "--notes=4093", "--archived-tokens=232514", "--output-tokens=128")
    assert measured["flops"] == given["flops"] and measured["storage"] == given["storage"]
    assert measured["inputs"]["basis"]["replay"] == "measured: mean of 2 records at length 1048576"
    assert measured["inputs"]["basis"]["helper"].startswith("memexp's own")
    override = cost(capsys, str(tmp_path), "--replay-tokens=128")
    assert override["inputs"]["replay"] == 128 and override["inputs"]["basis"]["replay"] == "given"
    assert override["inputs"]["basis"]["notes"].startswith("measured")


def test_a_run_folder_with_several_lengths_needs_one_chosen(capsys, tmp_path):
    base = {"context": 4000, "question": 40, "replay": 100, "generated": 8, "notes": 14, "archived": 800}
    write_run(tmp_path, [{**base, "length": 4096}, {**base, "length": 8192, "context": 8000, "notes": 30}])
    assert refused(capsys, str(tmp_path)).endswith("records at lengths 4096, 8192; choose one with length=N")
    assert cost(capsys, str(tmp_path), "length=8192")["inputs"]["notes"] == 30
    assert "with a run folder the configuration is the run's own" in refused(capsys, str(tmp_path), "backbone=gdn2")


@pytest.mark.parametrize("args,message", [
    (["--notes=abc"], "--notes='abc': must be a number"),
    (["--replay-tokens", "-3"], "--replay-tokens=-3: must be a number >= 0"),
    (["--output-tokens=1.5"], "--output-tokens='1.5': must be an integer"),
    (["--helper-mib"], "--helper-mib: needs a value"),
    (["--replay-tokns=3"], "--replay-tokns=3: not an option of cost"),
])
def test_an_invalid_option_is_one_line_naming_it(capsys, args, message):
    assert refused(capsys, "backbone=gdn", *args).startswith(f"memexp: {message}")
