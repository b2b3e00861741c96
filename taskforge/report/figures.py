"""The report's plots as Vega-Lite specs (plain JSON-able dicts, data inline) built from ``ReportData``.

    for fig in figure_specs(data):
        fig.spec                       # {"$schema": ".../vega-lite/v5.json", "data": {"values": [...]}, ...}
        vega.to_png(fig.spec)          # the dataset card's file; the page draws fig.spec with vega-embed

A ``FigureSpec`` names a plot and carries its spec; a spec exists only when its data does (no empty
axes): no funnel figure for a repository without a recorded funnel, no training plots without a log.
Histograms and stacks are computed here (bins, counts, stack offsets), so a spec only draws numbers it
is given. Specs are deterministic: same data, same dict, in the same order; no timestamps.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskforge.report.data import STRATEGY_TIERS, ReportData, RepoSummary, TaskSummary, TrainStep
from taskforge.report.vega import SCHEMA

SECTIONS = ("repos", "tasks", "timings", "audit", "train")
STRATEGY_COLORS = {"stub": "#4c78a8", "delete": "#f58518", "module": "#54a24b"}
OTHER_COLORS = ("#b279a2", "#9d755d", "#e45756", "#72b7b2", "#eeca3b", "#bab0ac")
STAGE_ORDER = ("profile", "covering", "affected", "delete", "hide", "contract", "audit")
ACCEPT, REJECT, NEUTRAL, LEFT = "#54a24b", "#e45756", "#4c78a8", "#bab0ac"
WIDTH = 460  # px of a single plot's data area; the page scales the drawing to its column
HALF = 200  # px of each plot of a side-by-side pair
CONFIG: dict[str, Any] = {
    "view": {"stroke": None},
    "font": "sans-serif",
    "axis": {"labelFontSize": 11, "titleFontSize": 11, "titleFontWeight": "normal", "gridOpacity": 0.5},
    "axisQuantitative": {"tickCount": 8},
    "legend": {"labelFontSize": 11, "labelLimit": 260, "symbolOpacity": 1},
    "title": {"fontSize": 13, "anchor": "start", "offset": 8},
}


@dataclass(frozen=True, slots=True)
class FigureSpec:
    key: str  # unique, [a-z0-9-]
    section: str  # one of SECTIONS
    title: str
    caption: str
    spec: dict[str, Any]  # a complete Vega-Lite v5 spec (data inline), JSON-able

    @property
    def for_dataset(self) -> bool:
        """Drawn from the dataset alone (what the dataset card embeds)."""
        return self.section != "train" and not self.key.startswith("grading")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def strategy_color(strategy: str, i: int = 0) -> str:
    return STRATEGY_COLORS.get(strategy, OTHER_COLORS[i % len(OTHER_COLORS)])


def _figure(key: str, section: str, title: str, caption: str, body: dict[str, Any]) -> FigureSpec:
    spec = {"$schema": SCHEMA, "description": f"{title}. {caption}", "background": "white", "padding": 6,
            **body, "config": CONFIG}
    return FigureSpec(key, section, title, caption, spec)


def _colors(domain: Sequence[str], range_: Sequence[str], legend: dict[str, Any] | None = None) -> dict[str, Any]:
    """A nominal color encoding of field ``series`` with a fixed domain (legend order) and colors."""
    enc: dict[str, Any] = {"field": "series", "type": "nominal",
                           "scale": {"domain": list(domain), "range": list(range_)}}
    enc["legend"] = None if legend is None else {"title": None, **legend}
    return enc


def _int_axis(title: str, top: int | None = None, **extra: Any) -> dict[str, Any]:
    """An axis of whole numbers; up to ``top`` <= 10, every integer is a tick (no repeated "1" labels)."""
    axis: dict[str, Any] = {"title": title, "tickMinStep": 1, "format": "d", **extra}
    if top is not None and top <= 10:
        axis["values"] = list(range(top + 1))
    return axis


# -- binning and stacking (matplotlib's ``hist`` semantics: equal bins, the last one closed) -------------
def _counts(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    counts = [0] * (len(edges) - 1)
    for v in values:
        if edges[0] <= v <= edges[-1]:
            counts[min(bisect.bisect_right(edges, v) - 1, len(counts) - 1)] += 1
    return counts


def _even_bins(values: Sequence[float], n: int = 10) -> list[float]:
    lo, hi = min(values), max(values)
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return [lo + (hi - lo) * i / n for i in range(n + 1)]


def _int_bins(values: Sequence[int], n: int = 12) -> list[float]:
    """Bins of whole numbers (at most ``n``) centred on the integers they count."""
    lo, hi = min(values), max(values)
    step = max(1, -(-(hi - lo + 1) // n))
    return [lo - 0.5 + step * i for i in range((hi - lo + 1 + step - 1) // step + 1)]


def _stacked_bins(groups: Mapping[str, Sequence[float]], edges: Sequence[float]) -> list[dict[str, Any]]:
    """One row per (group, non-empty bin): ``lo``/``hi`` bin edges, ``y0``/``y1`` its slice of the stack."""
    rows, base = [], [0] * (len(edges) - 1)
    for name, values in groups.items():
        for k, c in enumerate(_counts(values, edges)):
            if c:
                rows.append({"series": name, "lo": edges[k], "hi": edges[k + 1], "y0": base[k], "y1": base[k] + c,
                             "count": c})
                base[k] += c
    return rows


def _hist(rows: list[dict[str, Any]], color: dict[str, Any], x: dict[str, Any], ytitle: str = "tasks",
          **view: Any) -> dict[str, Any]:
    return {"data": {"values": rows}, "mark": {"type": "bar", "stroke": "white", "strokeWidth": 0.5},
            "encoding": {"x": {"field": "lo", "type": "quantitative", **x}, "x2": {"field": "hi"},
                         "y": {"field": "y0", "type": "quantitative",
                               "axis": _int_axis(ytitle, max((r["y1"] for r in rows), default=1))},
                         "y2": {"field": "y1"}, "color": color,
                         "tooltip": [{"field": "series", "title": "group"}, {"field": "lo", "title": "from"},
                                     {"field": "hi", "title": "to"}, {"field": "count", "title": "tasks"}]},
            **view}


# -- repositories ---------------------------------------------------------------------------------------
def _funnel(repo: RepoSummary) -> FigureSpec:
    total = repo.candidates or 1
    rows = [("candidates", "candidates", 0, repo.candidates)]  # (label, kind, x0, count)
    left = repo.candidates
    for reason, count in repo.rejected:
        left -= count
        rows.append((f"rejected: {reason}", "rejected", left, count))
    if repo.unaccounted:
        rows.append(("not reached", "not reached", left - repo.unaccounted, repo.unaccounted))
    rows.append(("accepted", "accepted", 0, repo.accepted))
    values = [{"label": label, "series": kind, "x0": max(0, x0), "x1": max(0, x0) + n, "text": f"{n} ({n / total:.0%})"}
              for label, kind, x0, n in rows]
    y = {"field": "label", "type": "nominal", "sort": None, "title": None}
    body = {
        "title": f"{repo.repo}: rejection funnel", "width": WIDTH, "height": {"step": 22},
        "data": {"values": values},
        "layer": [
            {"mark": "bar", "encoding": {
                "y": y, "x": {"field": "x0", "type": "quantitative", "title": "candidates",
                              "scale": {"domain": [0, repo.candidates * 1.25 + 1]},
                              "axis": _int_axis("candidates", repo.candidates)},
                "x2": {"field": "x1"},
                "color": _colors(["candidates", "rejected", "not reached", "accepted"], [NEUTRAL, REJECT, LEFT, ACCEPT]),
                "tooltip": [{"field": "label"}, {"field": "text", "title": "candidates"}]}},
            {"mark": {"type": "text", "align": "left", "dx": 3, "fontSize": 10},
             "encoding": {"y": y, "x": {"field": "x1", "type": "quantitative"}, "text": {"field": "text"}}},
        ],
    }
    return _figure(f"funnel-{slug(repo.repo)}", "repos", f"Rejection funnel: {repo.repo}",
                   f"{repo.candidates} candidates of {repo.repo}, each rejection reason, {repo.accepted} accepted.",
                   body)


def _strategies(repos: Sequence[RepoSummary], strategies: Sequence[str]) -> FigureSpec:
    labels = [f"{s} (tier {STRATEGY_TIERS.get(s, '?')})" for s in strategies]
    counts = [[dict(r.tasks_by_strategy).get(s, 0) for s in strategies] for r in repos]
    rows = [{"repo": r.repo, "series": label, "tasks": n}
            for r, ns in zip(repos, counts, strict=True) for label, n in zip(labels, ns, strict=True)]
    x = {"field": "repo", "type": "nominal", "sort": [r.repo for r in repos], "title": None,
         "axis": {"labelAngle": 0, "labelLimit": 140}}
    offset = {"field": "series", "sort": labels}
    top = math.ceil(max((n for ns in counts for n in ns), default=1) * 1.25)
    body = {
        "title": "accepted tasks per strategy", "width": WIDTH, "height": 170, "data": {"values": rows},
        "layer": [
            {"mark": "bar", "encoding": {
                "x": x, "xOffset": offset,
                "y": {"field": "tasks", "type": "quantitative", "axis": _int_axis("tasks in the dataset", top),
                      "scale": {"domain": [0, top]}},
                "color": _colors(labels, [strategy_color(s, i) for i, s in enumerate(strategies)],
                                 {"orient": "top", "direction": "horizontal"}),
                "tooltip": [{"field": "repo"}, {"field": "series", "title": "strategy"}, {"field": "tasks"}]}},
            {"mark": {"type": "text", "dy": -6, "fontSize": 10},
             "encoding": {"x": x, "xOffset": offset, "y": {"field": "tasks", "type": "quantitative"},
                          "text": {"field": "tasks"}}},
        ],
    }
    return _figure("strategies", "repos", "Accepted tasks per strategy",
                   "Tasks in the dataset per repository and deletion strategy.", body)


def _stage_time(repos: Sequence[RepoSummary]) -> FigureSpec:
    stages = list(dict.fromkeys([s for s in STAGE_ORDER if any(s in dict(r.stage_seconds) for r in repos)]
                                + sorted({k for r in repos for k, _ in r.stage_seconds} - set(STAGE_ORDER))))
    rows: list[dict[str, Any]] = []
    totals: list[dict[str, Any]] = []
    for r in repos:
        secs, left = dict(r.stage_seconds), 0.0
        for stage in stages:
            if secs.get(stage, 0.0) > 0:
                rows.append({"repo": r.repo, "series": stage, "x0": left, "x1": left + secs[stage],
                             "seconds": round(secs[stage], 1)})
                left += secs[stage]
        totals.append({"repo": r.repo, "total": left, "text": f"{left:.0f} s"})
    y = {"field": "repo", "type": "nominal", "sort": [r.repo for r in repos], "title": None}
    top = max(float(t["total"]) for t in totals)
    body = {
        "title": "time per stage", "width": WIDTH, "height": {"step": 24},
        "layer": [
            {"data": {"values": rows}, "mark": "bar", "encoding": {
                "y": y, "x": {"field": "x0", "type": "quantitative", "title": "seconds (summed over workers)",
                              "scale": {"domain": [0, top * 1.18 + 1]}},
                "x2": {"field": "x1"},
                "color": {"field": "series", "type": "nominal", "scale": {"domain": stages, "scheme": "tableau20"},
                          "legend": {"title": None, "orient": "bottom", "columns": min(6, len(stages))}},
                "tooltip": [{"field": "repo"}, {"field": "series", "title": "stage"}, {"field": "seconds"}]}},
            {"data": {"values": totals}, "mark": {"type": "text", "align": "left", "dx": 3, "fontSize": 10},
             "encoding": {"y": y, "x": {"field": "total", "type": "quantitative"}, "text": {"field": "text"}}},
        ],
    }
    return _figure("stage-time", "repos", "Time per stage",
                   "Seconds spent per pipeline stage and repository (profile = environment + baseline runs).", body)


# -- tasks ----------------------------------------------------------------------------------------------
def _tier_label(tier: int, tasks: Sequence[TaskSummary]) -> str:
    names = sorted({t.strategy for t in tasks if t.tier == tier})
    return f"tier {tier} ({', '.join(names)})"


def _difficulty(tasks: Sequence[TaskSummary]) -> FigureSpec:
    tiers = sorted({t.tier for t in tasks})
    labels = [_tier_label(k, tasks) for k in tiers]
    colors = [strategy_color(next(t.strategy for t in tasks if t.tier == k), i) for i, k in enumerate(tiers)]
    groups = {label: [min(1.0, max(0.0, t.score)) for t in tasks if t.tier == k] for k, label in zip(tiers, labels,
                                                                                                    strict=True)}
    rows = _stacked_bins(groups, [i / 10 for i in range(11)])
    body = _hist(rows, _colors(labels, colors, {"orient": "top-right"}),
                 {"title": "difficulty score (0 easiest, 1 hardest)", "scale": {"domain": [0, 1], "nice": False}},
                 title="difficulty per strategy tier", width=WIDTH, height=190)
    return _figure("difficulty", "tasks", "Difficulty per strategy tier",
                   "Histogram of the static difficulty score, stacked by strategy tier.", body)


def _int_hist_x(edges: Sequence[float], values: Sequence[int], title: str) -> dict[str, Any]:
    lo, hi = (min(values) - 5, max(values) + 5) if min(values) == max(values) else (edges[0], edges[-1])
    return {"title": title, "scale": {"domain": [lo, hi], "nice": False}, "axis": _int_axis(title)}


def _test_sizes(tasks: Sequence[TaskSummary]) -> FigureSpec:
    panels = []
    for name, values, color in (("FAIL_TO_PASS", [t.fail_to_pass for t in tasks], REJECT),
                                ("PASS_TO_PASS", [t.pass_to_pass for t in tasks], ACCEPT)):
        edges = _int_bins(values)
        rows = _stacked_bins({name: values}, edges)
        panels.append(_hist(rows, _colors([name], [color]), _int_hist_x(edges, values, f"{name} tests per task"),
                            title=f"{name} (median {sorted(values)[len(values) // 2]})", width=HALF, height=160))
    return _figure("test-sizes", "tasks", "FAIL_TO_PASS / PASS_TO_PASS sizes",
                   "How many hidden tests decide each task (FAIL_TO_PASS) and how many must stay green "
                   "(PASS_TO_PASS).", {"hconcat": panels, "spacing": 30, "resolve": {"scale": {"color": "independent"}}})


def _lines_deleted(tasks: Sequence[TaskSummary], strategies: Sequence[str]) -> FigureSpec:
    values = [t.lines_deleted for t in tasks]
    edges = _int_bins(values, 15)
    groups = {s: [t.lines_deleted for t in tasks if t.strategy == s] for s in strategies}
    body = _hist(_stacked_bins(groups, edges),
                 _colors(list(strategies), [strategy_color(s, i) for i, s in enumerate(strategies)],
                         {"orient": "top-right"}),
                 _int_hist_x(edges, values, "lines deleted"), title="lines deleted per task", width=WIDTH, height=170)
    return _figure("lines-deleted", "tasks", "Lines deleted",
                   "Source lines removed from the repository per task (the size of the gold patch), by strategy.",
                   body)


# -- timings and audit ----------------------------------------------------------------------------------
def _validation_time(tasks: Sequence[TaskSummary]) -> FigureSpec:
    checks = list(dict.fromkeys(c for t in tasks for c, _ in t.validation))
    n = Counter(c for t in tasks for c, _ in t.validation)
    labels = {c: f"{c} (n={n[c]})" for c in checks}
    rows = [{"check": labels[c], "seconds": s} for t in tasks for c, s in t.validation]
    y = {"field": "check", "type": "nominal", "sort": [labels[c] for c in checks], "title": None}
    x = {"field": "seconds", "type": "quantitative", "title": "seconds per sandbox run"}
    body = {
        "title": "validation timings per check", "width": WIDTH, "height": {"step": 30}, "data": {"values": rows},
        "layer": [
            {"mark": {"type": "boxplot", "extent": 1.5, "outliers": False, "size": 16, "color": "#9aaecb",
                      "median": {"color": "#1d2433"}},
             "encoding": {"y": y, "x": x}},
            {"mark": {"type": "point", "filled": True, "size": 14, "opacity": 0.6, "color": NEUTRAL},
             "encoding": {"y": y, "x": x, "tooltip": [{"field": "check"}, {"field": "seconds", "format": ".2f"}]}},
        ],
    }
    return _figure("validation-time", "timings", "Validation timings",
                   "Seconds of each sandbox run made while validating, per check (every repeat).", body)


def _audit(tasks: Sequence[TaskSummary]) -> FigureSpec:
    channels = list(dict.fromkeys(c for t in tasks for c in t.audit_channels))
    leaked = Counter(ch for t in tasks for ch in {h[0] for h in t.audit_hits})
    audited = Counter(ch for t in tasks for ch in t.audit_channels)
    rows, labels = [], []
    for ch in channels:
        clean = audited[ch] - leaked[ch]
        rows.append({"channel": ch, "series": "clean", "x0": 0, "x1": clean, "tasks": clean})
        if leaked[ch]:
            rows.append({"channel": ch, "series": "leak found", "x0": clean, "x1": audited[ch], "tasks": leaked[ch]})
        labels.append({"channel": ch, "x": audited[ch], "text": f"{clean}/{audited[ch]}"})
    y = {"field": "channel", "type": "nominal", "sort": channels, "title": None}
    per_channel = {
        "title": "tasks clean per channel", "width": 230, "height": {"step": 24},
        "layer": [
            {"data": {"values": rows}, "mark": "bar", "encoding": {
                "y": y, "x": {"field": "x0", "type": "quantitative", "title": "tasks",
                              "scale": {"domain": [0, max(audited.values(), default=1) * 1.3]},
                              "axis": _int_axis("tasks", max(audited.values(), default=1))},
                "x2": {"field": "x1"},
                "color": _colors(["clean", "leak found"], [ACCEPT, REJECT], {"orient": "bottom", "direction": "horizontal"}),
                "tooltip": [{"field": "channel"}, {"field": "series"}, {"field": "tasks"}]}},
            {"data": {"values": labels}, "mark": {"type": "text", "align": "left", "dx": 3, "fontSize": 10},
             "encoding": {"y": y, "x": {"field": "x", "type": "quantitative"}, "text": {"field": "text"}}},
        ],
    }
    secs = [t.audit_seconds for t in tasks]
    edges = _even_bins(secs)
    timing = _hist(_stacked_bins({"audit": secs}, edges), _colors(["audit"], [NEUTRAL]),
                   {"title": "audit seconds per task", "scale": {"domain": [edges[0], edges[-1]], "nice": False},
                    "axis": {"tickCount": 3, "format": ".3~f", "labelOverlap": "greedy", "labelFlush": True}},
                   title="audit time", width=170, height=140)
    return _figure("audit", "audit", "Leak audit",
                   "Per channel the agent can see, tasks in which the audit found none of the deleted code; "
                   "and the time each audit took.",
                   {"hconcat": [per_channel, timing], "spacing": 30, "resolve": {"scale": {"color": "independent"}}})


# -- training -------------------------------------------------------------------------------------------
def _step_x(train: Sequence[TrainStep]) -> dict[str, Any]:
    axis: dict[str, Any] = _int_axis("step")
    if len(train) < 12:
        axis["values"] = [s.step for s in train]
    return {"field": "step", "type": "quantitative", "axis": axis, "scale": {"zero": False}}


def _line_layer(rows: list[dict[str, Any]], x: dict[str, Any], color: dict[str, Any], y: dict[str, Any],
                shape: str = "circle", dash: Sequence[float] = ()) -> dict[str, Any]:
    mark: dict[str, Any] = {"type": "line", "point": {"filled": True, "size": 22, "shape": shape}, "strokeWidth": 1.6}
    if dash:
        mark["strokeDash"] = list(dash)
    return {"data": {"values": rows}, "mark": mark,
            "encoding": {"x": x, "y": {"field": "value", "type": "quantitative", **y}, "color": color,
                         "tooltip": [{"field": "step"}, {"field": "series"}, {"field": "value", "format": ".3f"}]}}


def _line(key: str, title: str, caption: str, section: str, layers: list[dict[str, Any]]) -> FigureSpec:
    body = {"title": title.lower() if section == "train" else title, "width": WIDTH, "height": 170, "layer": layers}
    return _figure(key, section, title, caption, body)


def _series(train: Sequence[TrainStep], name: str, value: Callable[[TrainStep], float | None]) -> list[dict[str, Any]]:
    return [{"step": s.step, "series": name, "value": v} for s in train if (v := value(s)) is not None]


def _episode_layers(train: Sequence[TrainStep], x: dict[str, Any]) -> list[FigureSpec]:
    """Agentic episodes: trajectory-monitor findings per rule, and why episodes ended, per step (none without)."""
    out = []
    palette = [REJECT, NEUTRAL, "#b279a2", "#9d755d", LEFT, ACCEPT] * 4
    for key, title, caption, get in (
            ("train-trajectory-monitor", "Trajectory monitor findings", "Tool calls of each step's episodes that went "
             "after the answer (package downloads, caches, byte code, git history, site-packages, network, test "
             "files), per rule.", lambda s: s.trajectory_monitor),
            ("train-episode-end", "Why episodes ended", "Episodes per end reason in each step (submitted, step, token "
             "or wall-clock budget, error).", lambda s: s.episode_end)):
        names = sorted({n for s in train for n in get(s)})
        if names:
            color = _colors(names, palette, {"orient": "top-left"})
            layers = [_line_layer(_series(train, n, lambda s, n=n, get=get: float(get(s).get(n, 0))), x, color,
                                  {"title": "count"}) for n in names]
            out.append(_line(key, title, caption, "train", layers))
    return out


def _train_specs(train: Sequence[TrainStep]) -> list[FigureSpec]:
    x = _step_x(train)
    unit = {"scale": {"domain": [-0.05, 1.05], "nice": False},
            "axis": {"values": [0, 0.25, 0.5, 0.75, 1], "format": ".2~f"}}

    pass_rate = [_line_layer(_series(train, "pass rate", lambda s: s.pass_rate), x, _colors(["pass rate"], [ACCEPT]),
                             {"title": "pass rate", **unit})]

    has_target = any(s.target is not None for s in train)
    names = ["sampled mean", "± 1 std"] + (["curriculum target"] if has_target else [])
    color = _colors(names, [NEUTRAL, "#d2ddeb", REJECT][:len(names)], {"orient": "top-left"})
    dy = {"title": "difficulty score", "scale": {"domain": [0, 1]}}
    band = [{"step": s.step, "series": "± 1 std", "lo": max(0.0, s.difficulty_mean - s.difficulty_std),
             "hi": min(1.0, s.difficulty_mean + s.difficulty_std)} for s in train]
    difficulty = [
        {"data": {"values": band}, "mark": {"type": "area"},
         "encoding": {"x": x, "y": {"field": "lo", "type": "quantitative", **dy}, "y2": {"field": "hi"},
                      "color": color}},
        _line_layer(_series(train, "sampled mean", lambda s: s.difficulty_mean), x, color, dy),
    ]
    if has_target:
        difficulty.append(_line_layer(_series(train, "curriculum target", lambda s: s.target), x, color, dy,
                                      dash=(5, 3)))

    zero_var = [_line_layer(_series(train, "zero-variance groups", lambda s: s.zero_variance_fraction), x,
                            _colors(["zero-variance groups"], ["#b279a2"]), {"title": "fraction of groups", **unit})]

    gcolor = _colors(["per rollout", "per step"], ["#9d755d", LEFT], {"orient": "top-left", "direction": "horizontal"})
    top = max(s.grading_seconds for s in train) * 1.35  # head room for the legend
    gy = {"title": "seconds", "scale": {"domain": [0, top]} if top > 0 else {}}
    grading = [_line_layer(_series(train, "per rollout", lambda s: s.grading_seconds / max(1, s.rollouts)), x,
                           gcolor, gy),
               _line_layer(_series(train, "per step", lambda s: s.grading_seconds), x, gcolor, gy, "square", (2, 2))]

    rules = sorted({r for s in train for r in s.monitor})
    monitor = []
    if rules:
        mcolor = _colors(rules, [REJECT, NEUTRAL, "#b279a2", "#9d755d", LEFT, ACCEPT] * 4, {"orient": "top-left"})
        monitor = [_line_layer(_series(train, rule, lambda s, r=rule: float(s.monitor.get(r, 0))), x, mcolor,
                               {"title": "findings"}) for rule in rules]

    episodes = _episode_layers(train, x)
    return [
        *episodes,
        *([_line("train-monitor", "Patch monitor findings",
                 "Hack signatures the patch monitor found in each step's rollouts, per rule (flag suspicious).",
                 "train", monitor)] if monitor else []),
        _line("train-pass-rate", "Pass rate", "Mean reward over every rollout graded in each step.", "train",
              pass_rate),
        _line("train-difficulty", "Sampled difficulty and curriculum target",
              "Mean and spread of the difficulty of the tasks sampled each step, and the curriculum's target.",
              "train", difficulty),
        _line("train-zero-variance", "Zero-variance groups",
              "Share of groups whose rollouts all got the same reward (no learning signal).", "train", zero_var),
        _line("grading-time", "Grading timings", "Seconds spent grading rollouts in the sandbox, per step and per "
              "rollout.", "timings", grading),
    ]


def figure_specs(data: ReportData) -> list[FigureSpec]:
    """Every plot the data supports, in page order."""
    specs = [_funnel(r) for r in data.repos if r.candidates > 0]
    tasks = data.tasks
    if tasks:
        specs.append(_strategies([r for r in data.repos if r.tasks_by_strategy], data.strategies))
    if any(r.stage_seconds for r in data.repos):
        specs.append(_stage_time([r for r in data.repos if r.stage_seconds]))
    if tasks:
        specs += [_difficulty(tasks), _test_sizes(tasks), _lines_deleted(tasks, data.strategies)]
        if any(t.validation for t in tasks):
            specs.append(_validation_time([t for t in tasks if t.validation]))
        if any(t.audit_channels for t in tasks):
            specs.append(_audit(tasks))
    if data.train:
        specs += _train_specs(data.train)
    return specs
