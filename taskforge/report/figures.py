"""The report's plots, drawn with matplotlib (object API, no pyplot, no global backend) from ``ReportData``.

    for spec in figure_specs(data):
        svg = render(spec, "svg")        # inline in the HTML report
        png = render(spec, "png")        # files the dataset card links

A ``FigureSpec`` names a plot and knows how to draw it; a spec exists only when its data does (no
empty axes): no funnel figure for a repository without a recorded funnel, no training plots without
a log. Rendering is deterministic: fixed SVG id salt per figure, no timestamps in the files.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskforge.report.data import STRATEGY_TIERS, ReportData, RepoSummary, TaskSummary, TrainStep

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SECTIONS = ("repos", "tasks", "timings", "audit", "train")
STRATEGY_COLORS = {"stub": "#4c78a8", "delete": "#f58518", "module": "#54a24b"}
OTHER_COLORS = ("#b279a2", "#9d755d", "#e45756", "#72b7b2", "#eeca3b", "#bab0ac")
STAGE_ORDER = ("profile", "covering", "affected", "delete", "hide", "contract", "audit")
ACCEPT, REJECT, NEUTRAL, LEFT = "#54a24b", "#e45756", "#4c78a8", "#bab0ac"
_RC: dict[str, Any] = {"font.size": 9, "axes.titlesize": 10, "axes.spines.top": False, "axes.spines.right": False,
       "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8, "legend.frameon": False,
       "svg.fonttype": "none", "figure.dpi": 100}


@dataclass(frozen=True, slots=True)
class FigureSpec:
    key: str  # unique, [a-z0-9-]
    section: str  # one of SECTIONS
    title: str
    caption: str
    size: tuple[float, float]  # inches
    draw: Callable[[Figure], None]
    margins: tuple[float, float, float, float] = (0.6, 0.48, 0.15, 0.3)  # left, bottom, right, top (inches)

    @property
    def for_dataset(self) -> bool:
        """Drawn from the dataset alone (what the dataset card embeds)."""
        return self.section != "train" and not self.key.startswith("grading")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def render(spec: FigureSpec, fmt: str) -> bytes:
    """The figure as ``svg`` (text as text, ids salted by the key) or ``png`` bytes."""
    import matplotlib
    from matplotlib.figure import Figure

    rc: Any = {**_RC, "svg.hashsalt": spec.key}
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=spec.size)  # fixed margins: a layout engine would double the drawing time
        w, h = spec.size
        left, bottom, right, top = spec.margins
        fig.subplots_adjust(left=left / w, bottom=bottom / h, right=1 - right / w, top=1 - top / h, wspace=0.3)
        spec.draw(fig)
        buf = io.BytesIO()
        meta: dict[str, Any] = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(buf, format=fmt, metadata=meta)
    return buf.getvalue()


def _render_share(specs: Sequence[FigureSpec], fmt: str, start: int, step: int) -> list[tuple[int, bytes]]:
    return [(i, render(specs[i], fmt)) for i in range(start, len(specs), step)]


def _fork_worker(specs: Sequence[FigureSpec], fmt: str, start: int, step: int, conn: Connection) -> None:
    try:
        conn.send(_render_share(specs, fmt, start, step))
    finally:
        conn.close()


def render_all(specs: Sequence[FigureSpec], fmt: str, jobs: int | None = None,
               timeout_s: float = 120.0) -> list[bytes]:
    """Every spec rendered, in order; split over ``jobs`` forked processes where fork exists.

    Figures are CPU-bound, so on several cores this divides their time. The specs hold closures: they
    reach the workers by fork (inherited memory), never by pickling; matplotlib is imported before
    forking so no worker imports it again. A worker that fails or runs past ``timeout_s`` is killed
    and its share is rendered here instead (same bytes: rendering is deterministic).
    """
    import multiprocessing

    import matplotlib.backends.backend_agg  # noqa: F401  (imported once, before forking)
    import matplotlib.backends.backend_svg  # noqa: F401
    import matplotlib.figure  # noqa: F401

    jobs = min(len(specs), jobs if jobs is not None else min(4, os.cpu_count() or 1))
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [render(s, fmt) for s in specs]
    ctx = multiprocessing.get_context("fork")
    workers = []
    for k in range(jobs):
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_fork_worker, args=(specs, fmt, k, jobs, send), daemon=True)
        proc.start()
        send.close()
        workers.append((proc, recv))
    out: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout_s
    for proc, recv in workers:
        try:
            if recv.poll(max(0.0, deadline - time.monotonic())):
                out.update(recv.recv())
        except (EOFError, OSError):
            pass  # the worker died: its share is rendered below
        finally:
            recv.close()
            if proc.is_alive():
                proc.kill()
            proc.join()
    return [out[i] if i in out else render(specs[i], fmt) for i in range(len(specs))]


def strategy_color(strategy: str, i: int = 0) -> str:
    return STRATEGY_COLORS.get(strategy, OTHER_COLORS[i % len(OTHER_COLORS)])


def _bar_labels(ax: Axes, bars: Any, labels: Sequence[str]) -> None:
    ax.bar_label(bars, labels=list(labels), padding=3, fontsize=8)


def _label_margin(labels: Sequence[str], extra: float = 0.0) -> float:
    """Inches left of the axes for y tick labels of these lengths (DejaVu Sans 9 pt: ~0.068 in a char)."""
    return 0.2 + extra + 0.068 * max((len(x) for x in labels), default=4)


def _integer_axis(axis: Any, nbins: int | str = "auto") -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(nbins=nbins, integer=True))


# -- repositories ---------------------------------------------------------------------------------------
def _funnel(repo: RepoSummary) -> FigureSpec:
    rows: list[tuple[str, int, float, str]] = [("candidates", repo.candidates, 0.0, NEUTRAL)]
    left = float(repo.candidates)
    for reason, count in repo.rejected:
        left -= count
        rows.append((f"rejected: {reason}", count, left, REJECT))
    if repo.unaccounted:
        rows.append(("not reached", repo.unaccounted, left - repo.unaccounted, LEFT))
    rows.append(("accepted", repo.accepted, 0.0, ACCEPT))

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        ys = range(len(rows))
        bars = ax.barh(ys, [r[1] for r in rows], left=[max(0.0, r[2]) for r in rows], color=[r[3] for r in rows])
        ax.set_yticks(list(ys), [r[0] for r in rows])
        ax.invert_yaxis()
        total = repo.candidates or 1
        _bar_labels(ax, bars, [f"{r[1]} ({r[1] / total:.0%})" for r in rows])
        ax.set_xlim(0, repo.candidates * 1.2 + 1)
        ax.set_xlabel("candidates")
        _integer_axis(ax.xaxis)
        ax.set_title(f"{repo.repo}: rejection funnel")

    return FigureSpec(f"funnel-{slug(repo.repo)}", "repos", f"Rejection funnel: {repo.repo}",
                      f"{repo.candidates} candidates of {repo.repo}, each rejection reason, "
                      f"{repo.accepted} accepted.", (6.4, 0.9 + 0.32 * len(rows)), draw,
                      (_label_margin([r[0] for r in rows]), 0.48, 0.15, 0.3))


def _strategies(repos: Sequence[RepoSummary], strategies: Sequence[str]) -> FigureSpec:
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        width = 0.8 / max(1, len(strategies))
        for i, s in enumerate(strategies):
            counts = [dict(r.tasks_by_strategy).get(s, 0) for r in repos]
            xs = [k + (i - (len(strategies) - 1) / 2) * width for k in range(len(repos))]
            bars = ax.bar(xs, counts, width, label=f"{s} (tier {STRATEGY_TIERS.get(s, '?')})",
                          color=strategy_color(s, i))
            _bar_labels(ax, bars, [str(c) for c in counts])
        ax.set_xticks(range(len(repos)), [r.repo for r in repos])
        ax.set_ylabel("tasks in the dataset")
        _integer_axis(ax.yaxis)
        ax.margins(y=0.3)
        ax.legend(loc="upper center", ncols=len(strategies))
        ax.set_title("accepted tasks per strategy")

    return FigureSpec("strategies", "repos", "Accepted tasks per strategy",
                      "Tasks in the dataset per repository and deletion strategy.",
                      (6.4, 2.6), draw)


def _stage_time(repos: Sequence[RepoSummary]) -> FigureSpec:
    stages = list(dict.fromkeys([s for s in STAGE_ORDER if any(s in dict(r.stage_seconds) for r in repos)]
                                + sorted({k for r in repos for k, _ in r.stage_seconds} - set(STAGE_ORDER))))
    ncols = min(6, len(stages))
    legend_rows = -(-len(stages) // ncols)

    def draw(fig: Figure) -> None:
        from matplotlib import colormaps

        palette = colormaps["tab20"]
        ax = fig.add_subplot()
        left = [0.0] * len(repos)
        for i, stage in enumerate(stages):
            secs = [dict(r.stage_seconds).get(stage, 0.0) for r in repos]
            ax.barh(range(len(repos)), secs, left=left, label=stage, color=palette(i % 20))
            left = [a + b for a, b in zip(left, secs, strict=True)]
        for k, total in enumerate(left):
            ax.text(total, k, f" {total:.0f} s", va="center", fontsize=8)
        ax.set_yticks(range(len(repos)), [r.repo for r in repos])
        ax.invert_yaxis()
        ax.set_xlim(0, max(left) * 1.18 + 1)
        ax.set_xlabel("seconds (summed over workers)")
        fig.legend(ncols=ncols, loc="lower center")
        ax.set_title("time per stage")

    return FigureSpec("stage-time", "repos", "Time per stage",
                      "Seconds spent per pipeline stage and repository (profile = environment + baseline runs).",
                      (6.4, 1.7 + 0.35 * len(repos) + 0.2 * legend_rows), draw,
                      (_label_margin([r.repo for r in repos]), 0.55 + 0.2 * legend_rows, 0.15, 0.3))


# -- tasks ----------------------------------------------------------------------------------------------
def _stacked_hist(ax: Axes, groups: dict[str, list[float]], bins: Any, colors: dict[str, str]) -> None:
    names = list(groups)
    ax.hist([groups[n] for n in names], bins=bins, stacked=True, label=names, color=[colors[n] for n in names],
            edgecolor="white", linewidth=0.5)
    ax.legend()


def _tier_label(tier: int, tasks: Sequence[TaskSummary]) -> str:
    names = sorted({t.strategy for t in tasks if t.tier == tier})
    return f"tier {tier} ({', '.join(names)})"


def _difficulty(tasks: Sequence[TaskSummary]) -> FigureSpec:
    tiers = sorted({t.tier for t in tasks})

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        groups = {_tier_label(k, tasks): [t.score for t in tasks if t.tier == k] for k in tiers}
        colors = {_tier_label(k, tasks): strategy_color(next(t.strategy for t in tasks if t.tier == k), i)
                  for i, k in enumerate(tiers)}
        _stacked_hist(ax, groups, [i / 10 for i in range(11)], colors)
        ax.set_xlim(0, 1)
        ax.set_xlabel("difficulty score (0 easiest, 1 hardest)")
        ax.set_ylabel("tasks")
        _integer_axis(ax.yaxis)
        ax.set_title("difficulty per strategy tier")

    return FigureSpec("difficulty", "tasks", "Difficulty per strategy tier",
                      "Histogram of the static difficulty score, stacked by strategy tier.", (6.4, 2.8), draw)


def _int_bins(values: Sequence[int], n: int = 12) -> list[float]:
    """Bins of whole numbers (at most ``n``) centred on the integers they count."""
    lo, hi = min(values), max(values)
    step = max(1, -(-(hi - lo + 1) // n))
    return [lo - 0.5 + step * i for i in range((hi - lo + 1 + step - 1) // step + 1)]


def _test_sizes(tasks: Sequence[TaskSummary]) -> FigureSpec:
    def draw(fig: Figure) -> None:
        axes = fig.subplots(1, 2)
        for ax, name, values, color in ((axes[0], "FAIL_TO_PASS", [t.fail_to_pass for t in tasks], REJECT),
                                        (axes[1], "PASS_TO_PASS", [t.pass_to_pass for t in tasks], ACCEPT)):
            ax.hist(values, bins=_int_bins(values), color=color, edgecolor="white", linewidth=0.5)
            _integer_axis(ax.xaxis, 5)
            if min(values) == max(values):  # one value: a narrow bar in a readable window, not a full-width block
                ax.set_xlim(min(values) - 5, max(values) + 5)
            ax.set_xlabel(f"{name} tests per task")
            ax.set_ylabel("tasks")
            _integer_axis(ax.yaxis)
            ax.set_title(f"{name} (median {sorted(values)[len(values) // 2]})")

    return FigureSpec("test-sizes", "tasks", "FAIL_TO_PASS / PASS_TO_PASS sizes",
                      "How many hidden tests decide each task (FAIL_TO_PASS) and how many must stay green "
                      "(PASS_TO_PASS).", (6.4, 2.6), draw)


def _lines_deleted(tasks: Sequence[TaskSummary], strategies: Sequence[str]) -> FigureSpec:
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        groups = {s: [float(t.lines_deleted) for t in tasks if t.strategy == s] for s in strategies}
        _stacked_hist(ax, groups, _int_bins([t.lines_deleted for t in tasks], 15),
                      {s: strategy_color(s, i) for i, s in enumerate(strategies)})
        ax.set_xlabel("lines deleted")
        ax.set_ylabel("tasks")
        _integer_axis(ax.yaxis)
        ax.set_title("lines deleted per task")

    return FigureSpec("lines-deleted", "tasks", "Lines deleted",
                      "Source lines removed from the repository per task (the size of the gold patch), by strategy.",
                      (6.4, 2.6), draw)


# -- timings and audit ----------------------------------------------------------------------------------
def _validation_time(tasks: Sequence[TaskSummary]) -> FigureSpec:
    checks = list(dict.fromkeys(c for t in tasks for c, _ in t.validation))

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        data = [[s for t in tasks for c, s in t.validation if c == check] for check in checks]
        import matplotlib

        flat: dict[str, Any] = ({"orientation": "horizontal"} if matplotlib.__version_info__ >= (3, 10)
                                else {"vert": False})
        ax.boxplot(data, widths=0.5, showfliers=False, **flat)
        for k, values in enumerate(data, 1):
            ax.plot(values, [k] * len(values), "o", color=NEUTRAL, alpha=0.6, markersize=3)
        ax.set_yticks(range(1, len(checks) + 1), [f"{c} (n={len(d)})" for c, d in zip(checks, data, strict=True)])
        ax.invert_yaxis()
        ax.set_xlabel("seconds per sandbox run")
        ax.set_title("validation timings per check")

    return FigureSpec("validation-time", "timings", "Validation timings",
                      "Seconds of each sandbox run made while validating, per check (every repeat).",
                      (6.4, 1.1 + 0.38 * len(checks)), draw,
                      (_label_margin([f"{c} (n=000)" for c in checks]), 0.48, 0.15, 0.3))


def _audit(tasks: Sequence[TaskSummary]) -> FigureSpec:
    channels = list(dict.fromkeys(c for t in tasks for c in t.audit_channels))

    def draw(fig: Figure) -> None:
        left, right = fig.subplots(1, 2, width_ratios=(3, 2))
        leaked = Counter(ch for t in tasks for ch in {h[0] for h in t.audit_hits})
        audited = Counter(ch for t in tasks for ch in t.audit_channels)
        clean = [audited[c] - leaked[c] for c in channels]
        hit = [leaked[c] for c in channels]
        bars = left.barh(range(len(channels)), clean, color=ACCEPT, label="clean")
        left.barh(range(len(channels)), hit, left=clean, color=REJECT, label="leak found")
        _bar_labels(left, bars, [f"{c}/{audited[ch]}" for c, ch in zip(clean, channels, strict=True)])
        left.set_yticks(range(len(channels)), channels)
        left.invert_yaxis()
        left.set_xlim(0, max(audited.values(), default=1) * 1.3)
        left.set_xlabel("tasks")
        _integer_axis(left.xaxis)
        fig.legend(loc="lower center", ncols=2)
        left.set_title("tasks clean per channel")
        right.hist([t.audit_seconds for t in tasks], bins=10, color=NEUTRAL, edgecolor="white", linewidth=0.5)
        right.set_xlabel("audit seconds per task")
        right.set_ylabel("tasks")
        _integer_axis(right.yaxis)
        right.set_title("audit time")

    return FigureSpec("audit", "audit", "Leak audit",
                      "Per channel the agent can see, tasks in which the audit found none of the deleted code; "
                      "and the time each audit took.", (6.4, 1.6 + 0.35 * max(3, len(channels))), draw,
                      (_label_margin(channels), 0.8, 0.15, 0.3))


# -- training -------------------------------------------------------------------------------------------
def _steps(train: Sequence[TrainStep]) -> list[int]:
    return [s.step for s in train]


def _line(key: str, title: str, caption: str, train: Sequence[TrainStep], section: str,
          series: Callable[[Axes], None], ylabel: str) -> FigureSpec:
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        series(ax)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.set_title(title.lower() if section == "train" else title)
        if len(train) < 12:
            ax.set_xticks(_steps(train))

    return FigureSpec(key, section, title, caption, (6.4, 2.5), draw)


def _train_specs(train: Sequence[TrainStep]) -> list[FigureSpec]:
    xs = _steps(train)

    def pass_rate(ax: Axes) -> None:
        ax.plot(xs, [s.pass_rate for s in train], "o-", color=ACCEPT, markersize=3)
        ax.set_ylim(-0.05, 1.05)

    def difficulty(ax: Axes) -> None:
        mean = [s.difficulty_mean for s in train]
        ax.fill_between(xs, [m - s.difficulty_std for m, s in zip(mean, train, strict=True)],
                        [m + s.difficulty_std for m, s in zip(mean, train, strict=True)], color=NEUTRAL, alpha=0.2,
                        label="± 1 std")
        ax.plot(xs, mean, "o-", color=NEUTRAL, markersize=3, label="sampled mean")
        if any(s.target is not None for s in train):
            ax.plot(xs, [float("nan") if s.target is None else s.target for s in train], "--", color=REJECT,
                    label="curriculum target")
        ax.set_ylim(0, 1)
        ax.legend(loc="upper left")

    def zero_var(ax: Axes) -> None:
        ax.plot(xs, [s.zero_variance_fraction for s in train], "o-", color="#b279a2", markersize=3)
        ax.set_ylim(-0.05, 1.05)

    def grading(ax: Axes) -> None:
        ax.plot(xs, [s.grading_seconds / max(1, s.rollouts) for s in train], "o-", color="#9d755d", markersize=3,
                label="per rollout")
        ax.plot(xs, [s.grading_seconds for s in train], "s:", color=LEFT, markersize=3, label="per step")
        ax.set_ylim(0, max(s.grading_seconds for s in train) * 1.35 + 0.1)
        ax.legend(loc="upper left", ncols=2)

    return [
        _line("train-pass-rate", "Pass rate", "Mean reward over every rollout graded in each step.", train, "train",
              pass_rate, "pass rate"),
        _line("train-difficulty", "Sampled difficulty and curriculum target",
              "Mean and spread of the difficulty of the tasks sampled each step, and the curriculum's target.",
              train, "train", difficulty, "difficulty score"),
        _line("train-zero-variance", "Zero-variance groups",
              "Share of groups whose rollouts all got the same reward (no learning signal).", train, "train",
              zero_var, "fraction of groups"),
        _line("grading-time", "Grading timings", "Seconds spent grading rollouts in the sandbox, per step and per "
              "rollout.", train, "timings", grading, "seconds"),
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
