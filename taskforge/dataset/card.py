"""The dataset card (``DIR/README.md``), generated from the data by filling ``datasets/card_template.md``.

Everything in the card is computed from the dataset itself (manifest, shard columns, ``funnel.json``):
what was mined, counts, the difficulty histogram, the rejection funnel, how to load it.
"""

from __future__ import annotations

import json
import string
from collections import Counter
from pathlib import Path
from typing import Any

from taskforge.dataset.funnel import FunnelTotals, read_funnel
from taskforge.dataset.manifest import CARD, write_bytes_atomic
from taskforge.dataset.reader import Dataset

TEMPLATE = Path(__file__).resolve().parents[2] / "datasets" / "card_template.md"
# Used only when taskforge runs from a wheel without the repository's ``datasets/`` folder.
_FALLBACK = "# ${title}\n\n${num_tasks} tasks.\n\n## What was mined\n\n${repos_table}\n\n## Counts\n\n" \
            "| | tasks |\n|---|---:|\n${counts_table}\n\n```\n${histogram}\n```\n\n## Rejection funnel\n\n${funnel}\n"


def histogram(scores: list[float], bins: int = 10, width: int = 40) -> str:
    """A text histogram of scores over [0, 1] (scores outside are clamped into the end bins)."""
    counts = [0] * bins
    for s in scores:
        if s == s:  # NaN belongs to no bin
            counts[min(bins - 1, int(min(1.0, max(0.0, s)) * bins))] += 1
    peak = max(counts) or 1
    lines = []
    for i, c in enumerate(counts):
        lo, hi = i / bins, (i + 1) / bins
        bar = "#" * (round(c / peak * width) if c else 0)
        lines.append(f"[{lo:.1f}, {hi:.1f}{']' if i == bins - 1 else ')'} {c:>6} {bar}")
    return "\n".join(lines)


def _pretty_name(repos: list[str]) -> str:
    """A YAML-safe (JSON-quoted) title naming up to three repositories."""
    shown = ", ".join(repos[:3]) + (f" and {len(repos) - 3} more" if len(repos) > 3 else "")
    return json.dumps(f"taskforge tasks: {shown or 'empty'}", ensure_ascii=False)


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return name
    return "100K<n<1M"


def _md_table(header: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return "_none_"
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(" ".join(str(c).split()).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def card_values(ds: Dataset) -> dict[str, Any]:
    cols = ["repo", "source", "version", "base_commit", "strategy", "difficulty_score", "difficulty_tier"]
    rows = ds.table(columns=cols).to_pylist()
    totals = FunnelTotals.of(read_funnel(ds.root).values())
    repos: dict[str, dict[str, Any]] = {}
    for r in rows:
        slot = repos.setdefault(r["repo"], {"sources": set(), "versions": set(), "commits": set(), "tasks": 0})
        slot["sources"].add(r["source"])
        slot["versions"].add(r["version"])
        slot["commits"].add(r["base_commit"][:12])
        slot["tasks"] += 1
    repo_rows = []
    for name in sorted(set(repos) | set(totals.per_repo)):
        slot = repos.get(name, {"sources": set(), "versions": set(), "commits": set(), "tasks": 0})
        fun = totals.per_repo.get(name, {})
        sources = set(slot["sources"]) | set(fun.get("sources", []))
        repo_rows.append([name, ", ".join(f"`{s}`" for s in sorted(sources)), ", ".join(sorted(slot["versions"])),
                          ", ".join(sorted(slot["commits"])), fun.get("candidates", "n/a"), slot["tasks"]])
    by_strategy = Counter(r["strategy"] for r in rows)
    by_tier = Counter(r["difficulty_tier"] for r in rows)
    counts = [f"| strategy `{k}` | {v} |" for k, v in sorted(by_strategy.items())]
    counts += [f"| tier {k} | {v} |" for k, v in sorted(by_tier.items())]
    counts.append(f"| duplicates dropped while writing | {ds.manifest.counts.get('duplicates_dropped', 0)} |")
    if totals.candidates:
        funnel_rows = [["candidates proposed", totals.candidates, "100%"]]
        funnel_rows += [[f"rejected: `{k}`", v, f"{v / totals.candidates:.0%}"] for k, v in totals.rejected.items()]
        funnel_rows.append(["**accepted**", totals.accepted, f"{totals.accepted / totals.candidates:.0%}"])
        funnel = _md_table(["", "count", "share"], funnel_rows)
    else:
        funnel = "_No funnel was recorded (the dataset was written without `funnel.json`)._"
    m = ds.manifest
    return {
        "pretty_name": _pretty_name([r[0] for r in repo_rows]),
        "title": json.loads(_pretty_name([r[0] for r in repo_rows])),
        "size_category": _size_category(len(rows)),
        "num_tasks": len(rows),
        "num_repos": len(repo_rows),
        "taskforge_version": m.taskforge_version,
        "schema_version": m.schema_version,
        "updated_at": m.updated_at,
        "repos_table": _md_table(["repo", "source", "version", "commit", "candidates", "tasks"], repo_rows),
        "counts_table": "\n".join(counts),
        "histogram": histogram([r["difficulty_score"] for r in rows]),
        "funnel": funnel,
        "root_name": ds.root.name,
    }


def render_card(ds: Dataset, template: str | None = None) -> str:
    if template is None:
        template = TEMPLATE.read_text() if TEMPLATE.is_file() else _FALLBACK
    return string.Template(template).substitute(card_values(ds))


def write_card(root: Path) -> Path:
    """(Re)generate ``DIR/README.md`` from the dataset at ``root``."""
    ds = Dataset.open(root, verify=False)
    path = Path(root) / CARD
    text = render_card(ds)
    # -- figures hook (issue 11; owned by taskforge/report): PNGs under DIR/figures/, linked before "Loading"
    from taskforge.report.card_figures import embed_figures

    text = embed_figures(ds.root, text)
    # -- end of figures hook
    write_bytes_atomic(path, text.encode())
    return path
