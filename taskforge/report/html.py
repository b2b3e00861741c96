"""One self-contained HTML page for a dataset (and a training run): Vega-Lite plots, CSS, scripts, data.

    write_report("datasets/out/demo", "report.html", train_log="run/metrics.jsonl")

Sections: repositories (funnel, strategies, time per stage), tasks (difficulty per tier, test sizes,
lines deleted), validation and grading timings, leak audit, training, and a task browser (filter box;
clicking a row shows problem statement, gold patch and test patch side by side). The figures are
Vega-Lite specs (``figures.py``) in one JSON blob, drawn in the browser by the Vega bundle inlined once
(``vega.javascript_bundle()``, cached on disk), so writing the page draws nothing. Nothing is fetched
when the page opens: no CDN, no fonts, no images by URL.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from taskforge.core.files import write_atomic
from taskforge.report.assets import CSS, FIGURES_JS, JS
from taskforge.report.data import ReportData, TaskSummary
from taskforge.report.figures import FigureSpec, figure_specs
from taskforge.report.vega import javascript_bundle

_SECTION_TITLES = {"repos": "Repositories", "tasks": "Tasks", "timings": "Validation and grading timings",
                   "audit": "Leak audit", "train": "Training"}


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _json_for_script(obj: Any) -> str:
    """JSON that cannot close its <script> element (``<``, ``>``, ``&`` escaped as \\u sequences)."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _figures(figs: Sequence[FigureSpec], section: str) -> str:
    """The ``<figure>`` of each spec of ``section``: an empty drawing area the page script fills, a caption."""
    items = [f'<figure class="plot" id="fig-{_e(f.key)}" data-key="{_e(f.key)}">'
             '<div class="vis"></div>'
             f"<figcaption><b>{_e(f.title)}.</b> {_e(f.caption)}</figcaption></figure>"
             for f in figs if f.section == section]
    return f'<div class="grid">{"".join(items)}</div>' if items else ""


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: set[int] | None = None,
           attrs: str = "") -> str:
    numeric = numeric or set()
    head = "".join(f'<th{" class=num" if i in numeric else ""}>{_e(h)}</th>' for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i in numeric else ""}>{c}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cards(data: ReportData) -> str:
    candidates = sum(r.candidates for r in data.repos)
    accepted = sum(r.accepted for r in data.repos)
    clean = sum(t.audit_passed for t in data.tasks)
    cards = [(len(data.tasks), "tasks"), (len(data.repos), "repositories"), (candidates, "candidates"),
             (f"{accepted / candidates:.0%}" if candidates else "n/a", "accepted"),
             (f"{clean}/{len(data.tasks)}", "audits clean")]
    if data.train:
        cards += [(len(data.train), "training steps"), (f"{data.train[-1].pass_rate:.2f}", "last pass rate")]
    return '<div class="cards">' + "".join(f'<div class="card"><b>{_e(v)}</b><span>{_e(k)}</span></div>'
                                           for v, k in cards) + "</div>"


def _repos_section(data: ReportData, figs: Sequence[FigureSpec]) -> str:
    rows = []
    for r in data.repos:
        reasons = ", ".join(f"{_e(k)}: {v}" for k, v in r.rejected) or "-"
        strat = ", ".join(f"{_e(k)}: {v}" for k, v in r.tasks_by_strategy) or "-"
        rows.append([f"<b>{_e(r.repo)}</b>", "<br>".join(_e(s) for s in r.sources) or "-", r.candidates or "n/a",
                     reasons, r.accepted, strat, f"{r.seconds / 60:.1f}"])
    table = _table(["repo", "sources", "candidates", "rejected", "accepted", "tasks per strategy", "minutes"], rows,
                   {2, 4, 6})
    missing = [r.repo for r in data.repos if r.candidates == 0]
    note = (f'<p class="note">No rejection funnel recorded for: {_e(", ".join(missing))} '
            "(written without funnel.json).</p>") if missing else ""
    return table + note + _figures(figs, "repos")


def _timings_table(tasks: Sequence[TaskSummary]) -> str:
    checks: dict[str, list[float]] = {}
    for t in tasks:
        for check, secs in t.validation:
            checks.setdefault(check, []).append(secs)
    rows = [[_e(c), len(v), f"{statistics.median(v):.2f}", f"{max(v):.2f}", f"{sum(v):.1f}"] for c, v in checks.items()]
    return _table(["check", "runs", "median s", "max s", "total s"], rows, {1, 2, 3, 4}) if rows else ""


def _audit_section(data: ReportData, figs: Sequence[FigureSpec]) -> str:
    leaked = [t for t in data.tasks if not t.audit_passed]
    channels = sorted({c for t in data.tasks for c in t.audit_channels})
    intro = (f"<p>{len(data.tasks) - len(leaked)} of {len(data.tasks)} tasks clean across channels "
             f"{_e(', '.join(channels) or '-')}; {sum(t.audit_fingerprints for t in data.tasks)} fingerprints "
             f"searched in {sum(t.audit_seconds for t in data.tasks):.1f} s.</p>")
    hits = [[_e(t.instance_id), _e(c), _e(p), f"<code>{_e(ev[:160])}</code>"] for t in leaked for c, p, ev in t.audit_hits]
    table = _table(["task", "channel", "path", "evidence"], hits) if hits else ""
    return intro + table + _figures(figs, "audit")


def _train_section(data: ReportData, figs: Sequence[FigureSpec]) -> str:
    if not data.train:
        return '<p class="note">No training log given (<code>taskforge report DIR --train-log LOG</code>).</p>'
    s = data.train
    mean = statistics.fmean(x.pass_rate for x in s)
    return (f"<p>{len(s)} steps from <code>{_e(data.train_log)}</code>, {sum(x.rollouts for x in s)} rollouts "
            f"graded; mean pass rate {mean:.3f}, last {s[-1].pass_rate:.3f}"
            + (f", curriculum target {s[-1].target:.3f}" if s[-1].target is not None else "")
            + ".</p>" + _figures(figs, "train") + _trajectory_table(s))


def _trajectory_table(steps: Sequence[Any], limit: int = 50) -> str:
    """The trajectory monitor's findings (agentic episodes): step, task, turn, tool, rule, evidence."""
    rows = [(s.step, _e(i), turn, _e(tool), _e(rule), f"<code>{_e(ev)}</code>")
            for s in steps for i, turn, tool, rule, ev in s.trajectory_findings]
    if not rows:
        return ""
    more = f" (first {limit} of {len(rows)})" if len(rows) > limit else ""
    return (f"<h3>Trajectory monitor findings{more}</h3><p>Tool calls that went after the answer instead of the "
            "feature; the turn counts model turns from 1.</p>"
            + _table(("step", "task", "turn", "tool", "rule", "evidence"), rows[:limit], {0, 2}))


def _task_browser(tasks: Sequence[TaskSummary]) -> str:
    rows = []
    for t in tasks:
        search = " ".join([t.instance_id, t.repo, t.strategy, *t.entities]).lower()
        audit = '<span class="badge ok">clean</span>' if t.audit_passed else '<span class="badge bad">leak</span>'
        rows.append(f'<tr tabindex="0" data-id="{_e(t.instance_id)}" data-search="{_e(search)}">'
                    f"<td>{_e(t.instance_id)}</td><td>{_e(t.repo)}</td><td>{_e(t.strategy)}</td>"
                    f'<td class="num">{t.tier}</td><td class="num">{t.score:.3f}</td>'
                    f'<td class="num">{t.lines_deleted}</td><td class="num">{t.fail_to_pass}</td>'
                    f'<td class="num">{t.pass_to_pass}</td><td class="num">{t.validation_seconds:.1f}</td>'
                    f"<td>{audit}</td></tr>")
    head = "".join(f'<th{" class=num" if i >= 3 and i < 9 else ""}>{h}</th>' for i, h in enumerate(
        ["instance id", "repo", "strategy", "tier", "difficulty", "lines deleted", "F2P", "P2P", "validation s",
         "audit"]))
    return f"""
<div class="toolbar"><input id="task-filter" type="search" placeholder="Filter tasks: id, repo, strategy, entity..."
 aria-label="Filter tasks"><span id="task-count" class="meta">{len(tasks)} tasks</span></div>
<div class="table-wrap"><table id="task-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>
<div id="task-detail" hidden>
 <h3 id="detail-title"></h3><p id="detail-meta" class="meta"></p>
 <div class="triple">
  <div><h4>Problem statement</h4><pre id="detail-problem" class="prose"></pre></div>
  <div><h4>Deleted code (gold patch)</h4><pre id="detail-patch" class="diff"></pre></div>
  <div><h4>Hidden tests (test patch)</h4><pre id="detail-tests" class="diff"></pre></div>
 </div>
 <details><summary>FAIL_TO_PASS tests</summary><pre id="detail-f2p"></pre></details>
</div>"""


def render_html(data: ReportData, figs: Sequence[FigureSpec], vega_js: str) -> str:
    """The page for ``data`` with the figures ``figs`` (each placed in its section), drawn by ``vega_js``.

    ``vega_js`` is the bundle of ``vega.javascript_bundle()`` (it defines ``window.vegaEmbed``).
    """
    tasks_json = _json_for_script({"tasks": [t.to_dict() for t in data.tasks]})
    specs_json = _json_for_script({f.key: f.spec for f in figs})
    nav = "".join(f'<a href="#{k}">{v}</a>' for k, v in _SECTION_TITLES.items()) + '<a href="#browser">Task browser</a>'
    empty = '<p class="note">No tasks in this dataset.</p>'
    sections = {
        "repos": _repos_section(data, figs),
        "tasks": _figures(figs, "tasks") if data.tasks else empty,
        "timings": (_timings_table(data.tasks) + _figures(figs, "timings")) if data.tasks else empty,
        "audit": _audit_section(data, figs) if data.tasks else empty,
        "train": _train_section(data, figs),
    }
    body = "".join(f'<section id="{k}"><h2>{_SECTION_TITLES[k]}</h2>{v}</section>' for k, v in sections.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(data.title)}</title><style>{CSS}</style></head>
<body>
<header><h1>{_e(data.title)}</h1>
<p class="meta">dataset <code>{_e(data.root)}</code> · taskforge {_e(data.taskforge_version)} · updated
 {_e(data.updated_at)} · {data.duplicates_dropped} duplicates dropped while writing</p>
{_cards(data)}<nav>{nav}</nav></header>
{body}
<section id="browser"><h2>Task browser</h2>{_task_browser(data.tasks)}</section>
<footer>Generated by <code>taskforge report</code>; self-contained, opens offline.</footer>
<script type="application/json" id="task-data">{tasks_json}</script>
<script>{JS}</script>
<script type="application/json" id="figure-specs">{specs_json}</script>
<script>{vega_js}</script>
<script>{FIGURES_JS}</script>
</body></html>
"""


def build_report(root: Path | str, train_log: Path | str | None = None, *,
                 assets_dir: Path | str | None = None) -> str:
    """Collect the dataset (and log), build every figure's spec, return the HTML page.

    ``assets_dir`` holds the cached Vega bundle (default ``<work_dir>/report-assets``).
    """
    data = ReportData.collect(root, train_log)
    return render_html(data, figure_specs(data), javascript_bundle(assets_dir))


def write_report(root: Path | str, out: Path | str, train_log: Path | str | None = None, *,
                 assets_dir: Path | str | None = None) -> Path:
    """Write the report of ``root`` to ``out`` atomically (temporary file, then rename); returns ``out``."""
    out = Path(out)
    write_atomic(out, build_report(root, train_log, assets_dir=assets_dir))
    return out
