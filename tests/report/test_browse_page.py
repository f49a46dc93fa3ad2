"""`memexp browse` on a real NoteBank run of the quick-start model (tiny_gdn_words, two RULER
questions), opened in headless Chromium: the question view of a known record shows its notes,
each channel's vote, its prediction and references; the page's filter (its #hash) hides the
other questions; nothing is fetched from the network.

Skipped in one line without Debian's `chromium`, unless MEMEXP_REQUIRE_BROWSER=1."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from memexp.cli.main import main as memexp_main
from memexp.core.compose import load_config
from memexp.run.runner import run

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("browse")
    summary = run(load_config(["bench.tasks=[niah_single_1,niah_multikey_1]", "bench.lengths=[1024]",
                               "bench.num_samples=1", "progress=false", f"output_dir={out / 'runs'}"]))
    assert summary["num_questions"] == 2
    assert memexp_main(["browse", str(out / "runs"), "--out", str(out / "page")]) == 0
    (records,) = list((out / "runs").rglob("records.jsonl"))
    return out / "page" / "index.html", [json.loads(line) for line in records.read_text().splitlines()]


def dump_dom(path: Path, fragment: str, profile: Path) -> str:
    if BROWSER is None:
        if os.environ.get("MEMEXP_REQUIRE_BROWSER") == "1":
            pytest.fail("MEMEXP_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
        pytest.skip("no chromium on PATH: the browser check is skipped (apt-get install chromium)")
    out = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                          f"{path.resolve().as_uri()}#{fragment}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "<section" in out.stdout, out.stderr[-2000:]
    return out.stdout


def sections(dom: str) -> dict[str, str]:
    """question id -> the (unescaped) outer HTML of its section in the browser's DOM."""
    found = re.findall(r'<section class="question"([^>]*)>(.*?)</section>', dom, flags=re.S)
    out = {}
    for attrs, body in found:
        key = html.unescape(re.search(r'id="([^"]*)"', attrs).group(1))
        out[key] = html.unescape(attrs + body)
    return out


def test_a_known_question_shows_its_notes_votes_and_prediction(page, tmp_path):
    path, records = page
    dom = dump_dom(path, "", tmp_path / "profile")
    shown = sections(dom)
    assert len(shown) == 2
    rec = next(r for r in records if r["task"] == "niah_single_1")
    view = shown[f"{rec['example_id']}::{rec['question_id']}"]
    assert f">{rec['prediction']}<" in view
    for ref in rec["references"]:
        assert f"<li>{ref}</li>" in view
    selected = rec["method_stats"]["selected"]
    assert selected and len(rec["method_stats"]["written"]) == rec["method_stats"]["notes"]
    assert f"written notes ({rec['method_stats']['notes']})" in view
    for note in selected:
        row = re.search(rf'<tr class="routed-note" data-note="{note["note"]}">(.*?)</tr>', view, flags=re.S).group(1)
        assert f'<td class="num">{note["votes"]}</td>' in row
        assert len(note["channels"]) == note["votes"]  # a vote is a channel's
        assert f'<td class="channels">{", ".join(note["channels"])}</td>' in row
        assert note["text"].strip()[:40] in row
    assert any(n["channels"] for n in selected)
    assert sum(len(n["channels"]) for n in selected) == len({c for n in selected for c in n["channels"]})
    # the prompt: the context around the reference, the reference marked
    assert f"<mark>{rec['references'][0]}</mark>" in view
    assert "2 of 2 questions shown" in dom  # the page's script ran


def test_the_hash_filters_by_task_and_correctness(page, tmp_path):
    path, records = page
    dom = dump_dom(path, "task=niah_multikey_1", tmp_path / "profile")
    hidden = {k: " hidden" in v.split(">", 1)[0] for k, v in sections(dom).items()}
    assert hidden == {f"{r['example_id']}::{r['question_id']}": r["task"] != "niah_multikey_1" for r in records}
    assert "1 of 2 questions shown" in dom
    wrong = sum(r["score"] < 50 for r in records)
    assert f"{wrong} of 2 questions shown" in dump_dom(path, "correct=0", tmp_path / "profile2")


def test_the_page_fetches_nothing(page):
    path, _ = page
    text = path.read_text()
    assert not re.search(r'(?:src|href)\s*=\s*"(?:https?:)?//', text)
    assert "<link" not in text and "@import" not in text and "url(http" not in text
