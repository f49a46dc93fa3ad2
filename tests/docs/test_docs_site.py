"""The documentation site builds with `mkdocs build --strict` (a broken link, a missing page or an
unexplained schema field fails it) and its home page, opened in headless Chromium, renders the
navigation to every section, the lab notebook under its own label.

The browser part is skipped in one line without Debian's `chromium`, unless MEMEXP_REQUIRE_BROWSER=1."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from docs_hooks import REPO

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
SECTIONS = ["Getting started", "Running and sweeping", "Results", "Reproducing the papers", "Methods", "Backbones",
            "Benchmarks", "The embedded models", "Extending memexp", "Configuration reference", "Measured figures",
            "Lab notebook"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-4000:]
    return out


def rendered(page, profile) -> str:
    if BROWSER is None:
        if os.environ.get("MEMEXP_REQUIRE_BROWSER") == "1":
            pytest.fail("MEMEXP_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
        pytest.skip("no chromium on PATH: the browser check is skipped (apt-get install chromium)")
    out = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", f"--user-data-dir={profile}", "--dump-dom",
                          page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "</nav>" in out.stdout, out.stderr[-2000:]
    return out.stdout


def test_the_home_page_renders_the_navigation(site, tmp_path):
    dom = rendered(site / "index.html", tmp_path / "profile")
    nav = re.search(r'<nav class="md-nav md-nav--primary".*?</nav>\s*</div>', dom, re.S)
    assert nav, "no primary navigation on the home page"
    labels = [re.sub(r"\s+", " ", t).strip() for t in re.findall(r">([^<>]+)<", nav.group(0))]
    for section in SECTIONS:
        assert section in labels, f"the navigation has no {section!r}"
    # the lab notebook is its own labelled section, after every user page
    assert labels.index("Lab notebook") > labels.index("Measured figures")


def test_the_configuration_reference_is_generated_into_the_site(site):
    page = (site / "reference" / "configuration" / "index.html").read_text()
    assert "method.replay_budget" in page and "R: notes replayed per question" in page
    assert "no explanation in the source" not in page


def options(group: str) -> list[str]:
    """The option files of a config group, read from the folder (conf/ at the top, or inside the package)."""
    conf = REPO / "conf" if (REPO / "conf").is_dir() else REPO / "memexp" / "conf"
    return sorted(p.stem for p in (conf / group).glob("*.yaml") if not p.name.endswith(".paper.yaml"))


def test_the_pages_list_every_shipped_option_and_paper_table(site):
    backbones = (site / "backbones" / "index.html").read_text()
    for option in options("backbone"):
        assert f"backbone={option}" in backbones, f"the Backbones page does not list backbone={option}"
    benches = (site / "benches" / "index.html").read_text()
    for option in options("bench"):
        assert f"bench={option}" in benches
    notebank = (site / "reproducing-notebank" / "index.html").read_text()
    titan = (site / "reproducing-titan" / "index.html").read_text()
    for preset in options("experiment"):
        if preset.startswith("paper_"):
            assert f"{preset}</code>: " in notebank, f"no paper numbers for {preset}"
        elif preset.startswith("titan_"):
            assert f"{preset}</code>: " in titan, f"no paper numbers for {preset}"
