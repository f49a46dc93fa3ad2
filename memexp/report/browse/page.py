"""One self-contained HTML page over run folders: the summary tables (and the score-vs-length
figure as an embedded PNG), and a question view of every recorded question.

Nothing is fetched: styles, script and images are inside the file, so it opens from the file
system (or an e-mail) as it is. Each question is a <section class="question"> carrying
data-task, data-length, data-correct and data-run; the filter bar (and the page's #hash,
`#task=qa_1&length=4096&correct=0`) hides the others. A question shows its prompt (the context
around each reference, collapsible), the written notes with their positions, the routed notes
with each channel's vote, the replay, the prediction against the references, and the score.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Iterable

from memexp.core.types import READ_SHARED_BY
from memexp.report.tables import Table, length_table, row_labels
from memexp.results.runs import Run, by_bench

CORRECT = 50.0  # a question counts as correct at this score or above (RULER's partial matches count below)

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}
td.num{text-align:right}th{background:#f3f3f3}
.question{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:.8em 0}
.question[data-correct="1"]{border-left:6px solid #3a3}.question[data-correct="0"]{border-left:6px solid #c33}
.meta{color:#666;font-size:12px}pre{white-space:pre-wrap;background:#fafafa;padding:.4em;margin:.3em 0;font-size:12px}
mark{background:#fd5}.routed{background:#e6f0ff}.filters{position:sticky;top:0;background:#fff;padding:.5em 0;
border-bottom:1px solid #ccc}.filters label{margin-right:1em}img{max-width:100%}
"""

SCRIPT = """
function applyFilters(){
  var f={task:document.getElementById('f-task').value,length:document.getElementById('f-length').value,
         correct:document.getElementById('f-correct').value};
  var shown=0;
  document.querySelectorAll('section.question').forEach(function(s){
    var ok=(!f.task||s.dataset.task===f.task)&&(!f.length||s.dataset.length===f.length)&&
           (!f.correct||s.dataset.correct===f.correct);
    if(ok){s.removeAttribute('hidden');shown++;}else{s.setAttribute('hidden','');}
  });
  document.getElementById('shown').textContent=shown+' of '+document.querySelectorAll('section.question').length+' questions shown';
}
function fromHash(){
  var params=new URLSearchParams(location.hash.slice(1));
  ['task','length','correct'].forEach(function(k){if(params.has(k)){document.getElementById('f-'+k).value=params.get(k);}});
  applyFilters();
}
document.addEventListener('DOMContentLoaded',function(){
  ['task','length','correct'].forEach(function(k){document.getElementById('f-'+k).addEventListener('change',applyFilters);});
  window.addEventListener('hashchange',fromHash);fromHash();
});
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def table_html(t: Table) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in [t.corner, *t.columns])
    body = []
    for name, row in t.rows:
        cells = []
        for c in t.columns:
            cell = row.get(c)
            text = "-" if cell is None or cell.score is None else f"{cell.score:.1f}" + (
                f" (n={cell.n})" if cell.n is not None else "")
            cells.append(f'<td class="num">{esc(text)}</td>')
        body.append(f"<tr><td>{esc(name)}</td>{''.join(cells)}</tr>")
    notes = "".join(f'<p class="meta">{esc(n)}</p>' for n in t.notes)
    return f"<h3>{esc(t.title)}</h3><table><tr>{head}</tr>{''.join(body)}</table>{notes}"


def _figure(bench: str, runs: list[Run], folder: Path) -> str:
    """The score-vs-length figure as an embedded PNG; none without matplotlib."""
    try:
        from memexp.report.figures import length_figure
    except ImportError:
        return ""
    try:
        path = length_figure(folder / f"{bench}_length.png", bench, runs)
    except ImportError:
        return ""
    data = base64.b64encode(path.read_bytes()).decode()
    path.unlink()
    return f'<img alt="{esc(bench)}: score vs context length" src="data:image/png;base64,{data}">'


def _excerpt(ex: dict) -> str:
    text, out, at = ex.get("text", ""), [], 0
    for s, e in sorted(ex.get("marks") or []):
        out += [esc(text[at:s]), f"<mark>{esc(text[s:e])}</mark>"]
        at = e
    out.append(esc(text[at:]))
    return f'<pre data-start="{esc(ex.get("start"))}">{"".join(out)}</pre>'


def _notes(stats: dict) -> str:
    """The written notes (positions; routed ones highlighted) and the routed notes with their
    votes, each channel's vote and text."""
    selected = [e for e in stats.get("selected") or [] if isinstance(e, dict)]
    routed = {e.get("note") for e in selected}
    parts = []
    written = stats.get("written")
    if written:
        items = "".join(f'<li class="{"routed" if i in routed else ""}" data-note="{i}">note {i}: chunk {c}, '
                        f"tokens {s}-{e}</li>" for i, (c, s, e) in enumerate(written))
        parts.append(f'<details class="written"><summary>written notes ({len(written)})</summary><ol start="0">'
                     f"{items}</ol></details>")
    if selected:
        rows = []
        for e in selected:
            vote = e.get("votes", e.get("score", ""))
            channels = ", ".join(map(str, e.get("channels") or []))
            rows.append(f'<tr class="routed-note" data-note="{esc(e.get("note"))}"><td>{esc(e.get("note"))}</td>'
                        f'<td>{esc(e.get("start"))}-{esc(e.get("end"))}</td><td class="num">{esc(vote)}</td>'
                        f'<td class="channels">{esc(channels)}</td><td><pre>{esc(e.get("text", ""))}</pre></td></tr>')
        parts.append(f'<details class="routed-notes" open><summary>routed notes ({stats.get("router", "")} router, '
                     f"{len(selected)})</summary><table><tr><th>note</th><th>tokens</th><th>votes / score</th>"
                     f"<th>channels that voted</th><th>text</th></tr>{''.join(rows)}</table></details>")
        replay = "\n".join(str(e.get("text", "")) for e in selected)
        parts.append(f'<details class="replay"><summary>replay ({stats.get("replay_tokens", "?")} tokens)'
                     f'</summary><pre>{esc(replay)}</pre></details>')
    return "".join(parts)


def question_html(run_label: str, rec: dict) -> str:
    score = float(rec.get("score", 0.0))
    correct = "1" if score >= CORRECT else "0"
    excerpts = rec.get("context_excerpts") or []
    prompt = "".join(_excerpt(ex) for ex in excerpts) or '<p class="meta">no context excerpt recorded</p>'
    numbers = " · ".join(f"{k} {v}" for k, v in (rec.get("tokens") or {}).items())
    seconds = " · ".join(f"read shared by {v} jobs" if k == READ_SHARED_BY else f"{k} {v:.3f} s"
                         for k, v in (rec.get("seconds") or {}).items() if isinstance(v, (int, float)))
    refs = "".join(f"<li>{esc(r)}</li>" for r in rec.get("references") or [])
    return (f'<section class="question" id="{esc(rec.get("example_id"))}::{esc(rec.get("question_id"))}" '
            f'data-run="{esc(run_label)}" data-task="{esc(rec.get("task"))}" data-length="{esc(rec.get("length"))}" '
            f'data-correct="{correct}">'
            f'<div class="meta">{esc(run_label)} · {esc(rec.get("task"))} · length {esc(rec.get("length"))} · '
            f'{esc(rec.get("example_id"))} / {esc(rec.get("question_id"))}</div>'
            f'<p><b>score <span class="score">{score:g}</span></b> ({esc(rec.get("metric", ""))}) · '
            f'prediction: <code class="prediction">{esc(rec.get("prediction", ""))}</code></p>'
            f'<div>references:<ul class="references">{refs}</ul></div>'
            f'<details class="prompt"><summary>prompt: context around the references ({len(excerpts)} excerpts)'
            f'</summary>{prompt}<pre class="question-text">{esc(rec.get("question") or "")}</pre></details>'
            f"{_notes(rec.get('method_stats') or {})}"
            f'<div class="meta">tokens: {esc(numbers)}<br>seconds: {esc(seconds)}</div></section>')


def _options(values: Iterable[str]) -> str:
    return "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)


def page(runs: list[Run], folder: Path, title: str = "memexp results") -> str:
    """The whole page; `folder` is where it is written (figures are drawn there, then embedded)."""
    from memexp.run.records import _length_order

    summary, questions = [], []
    for bench, group in by_bench(runs).items():
        summary.append(f"<h2>{esc(bench)}</h2>{_figure(bench, group, folder)}")
        summary.append(table_html(length_table(bench, group)))
        for label, run in zip(row_labels(group), group):
            questions += [question_html(label, rec) for rec in run.records]
    records = [rec for r in runs for rec in r.records]
    tasks = sorted({str(r.get("task")) for r in records})
    lengths = sorted({str(r.get("length")) for r in records}, key=_length_order)
    filters = (f'<div class="filters"><label>task <select id="f-task"><option value="">all</option>{_options(tasks)}'
               f'</select></label><label>length <select id="f-length"><option value="">all</option>'
               f'{_options(lengths)}</select></label><label>answer <select id="f-correct"><option value="">all'
               f'</option><option value="1">correct (score &ge; {CORRECT:g})</option><option value="0">wrong</option>'
               f'</select></label><span id="shown"></span></div>')
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{STYLE}</style><script>{SCRIPT}</script></head><body>"
            f"<h1>{esc(title)}</h1>{''.join(summary)}<h2>Questions</h2>{filters}{''.join(questions)}"
            f"<script type=\"application/json\" id=\"runs\">{esc(json.dumps([str(r.path) for r in runs]))}</script>"
            "</body></html>\n")
