"""``taskforge bench validation-cost DIR``: where validation's test time goes, in full-suite equivalents.

Reads a ``taskforge bench corpus --out DIR`` folder (every package's candidate journal
``DIR/packages/NAME/dataset/.journal`` and its profile's baseline under ``DIR/work/profiles``), so a figure
can be taken from any corpus run, killed or finished. Per package and over all of them:

- **suite-eq/task**: summed sandbox test time of every decided candidate / one full-suite run (the
  baseline's median, ``corpus_report.baseline_numbers``) / accepted candidates (issue 19 item 5: <= 2);
- **accepted**: per check of the validation contract (``ValidationRun.check``: ``early_broken``,
  ``collect_hidden``, ``p2p_broken``, ``empty_patch``, ``gold_patch``, ``battery_*``), its test time per
  accepted task in suite equivalents, and the number of such runs per accepted task;
- **rejected**: the test time rejected candidates cost, per rejection reason, per accepted task.

To reproduce a before/after pair: run ``taskforge bench corpus --only toolz,inflection --budget-cpu-min 4
--out DIR`` on each commit, then this command on each ``DIR``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from taskforge.bench.corpus_report import baseline_numbers, read_journal


def _runs(task: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    runs = task.get("validation") or []
    return json.loads(runs) if isinstance(runs, str) else list(runs)


def _profile_of(work: Path, package: str) -> Path | None:
    from taskforge.bench.corpus_report import canonical

    for meta in sorted(Path(work).glob("profiles/*/profile.json")):
        try:
            name = json.loads(meta.read_text()).get("snapshot", {}).get("name", "")
        except (OSError, ValueError):
            continue
        if canonical(str(name)) == canonical(package):
            return meta.parent
    return None


def package_cost(dataset: Path, suite_s: float | None) -> dict[str, Any]:
    """The cost figures of one package's journal (module docstring); ``suite_s`` None: seconds only."""
    journal = [e for _t, e in read_journal(dataset)]
    tasks = [e["task"] for e in journal if e.get("task")]
    by_check: dict[str, float] = {}
    runs_per_check: Counter[str] = Counter()
    for task in tasks:
        for run in _runs(task):
            check = str(run.get("check", "?"))
            key = "battery" if check.startswith("battery_") else check
            by_check[key] = by_check.get(key, 0.0) + float(run.get("seconds", 0.0))
            runs_per_check["battery" if check.startswith("battery_") else check] += 1
    rejected: dict[str, float] = {}
    for e in journal:
        if e.get("rejected"):
            reason = str(e["rejected"].get("reason", "?"))
            rejected[reason] = rejected.get(reason, 0.0) + float(e.get("test_seconds", 0.0))
    test_s = sum(float(e.get("test_seconds", 0.0)) for e in journal)
    n = len(tasks)

    def eq(seconds: float) -> float | None:
        return round(seconds / suite_s / n, 3) if n and suite_s else None

    return {"suite_s": suite_s, "decided": len(journal), "accepted": n, "test_s": round(test_s, 2),
            "suite_eq_per_task": eq(test_s),
            "accepted_test_s": round(sum(float(e.get("test_seconds", 0.0)) for e in journal if e.get("task")), 2),
            "accepted_by_check": {k: eq(v) for k, v in _most_first(by_check)},
            "runs_per_task": {k: round(v / n, 2) for k, v in runs_per_check.most_common()} if n else {},
            "rejected_by_reason": {k: eq(v) for k, v in _most_first(rejected) if v > 0}}


def _most_first(totals: dict[str, float]) -> list[tuple[str, float]]:
    """``Counter.most_common`` for float totals (ties keep insertion order)."""
    return sorted(totals.items(), key=lambda kv: -kv[1])


def corpus_cost(out: Path) -> dict[str, Any]:
    """``{package: package_cost}`` of every package under ``out/packages``, and ``"all"`` over them."""
    result: dict[str, Any] = {}
    test_eq = tasks = 0.0
    for pdir in sorted(Path(out).glob("packages/*")):
        if not (pdir / "dataset").is_dir():
            continue
        suite = baseline_numbers(_profile_of(Path(out) / "work", pdir.name)).get("suite_s")
        cost = package_cost(pdir / "dataset", suite)
        result[pdir.name] = cost
        if cost["suite_eq_per_task"] is not None:
            test_eq += cost["suite_eq_per_task"] * cost["accepted"]
            tasks += cost["accepted"]
    result["all"] = {"accepted": int(tasks), "suite_eq_per_task": round(test_eq / tasks, 2) if tasks else None}
    return result


def render(cost: Mapping[str, Any]) -> str:
    lines = []
    for name, c in cost.items():
        if name == "all":
            continue
        lines.append(f"{name}: suite {c['suite_s']} s, {c['accepted']} accepted of {c['decided']} decided, "
                     f"{c['test_s']} s of test time -> {c['suite_eq_per_task']} suite-eq/task")
        lines.append("  accepted, per check: " + ", ".join(
            f"{k} {v} ({c['runs_per_task'].get(k)} runs)" for k, v in c["accepted_by_check"].items()))
        if c["rejected_by_reason"]:
            lines.append("  rejected, per reason: " + ", ".join(f"{k} {v}" for k, v in c["rejected_by_reason"].items()))
    lines.append(f"all: {cost['all']['accepted']} accepted, {cost['all']['suite_eq_per_task']} suite-eq/task")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("validation-cost")
    def validation_cost(
        out: Annotated[Path, typer.Argument(help="A `taskforge bench corpus --out` folder.")],
        json_out: Annotated[Path | None, typer.Option("--json", help="Also write the figures here.")] = None,
    ) -> None:
        """Validation's test time per accepted task in full-suite runs, split by check and by rejection."""
        if not (out / "packages").is_dir():
            typer.echo(f"error: {out} has no packages/ folder; pass the --out folder of `taskforge bench corpus`",
                       err=True)
            raise typer.Exit(2)
        cost = corpus_cost(out)
        if json_out is not None:
            json_out.write_text(json.dumps(cost, indent=2) + "\n")
        typer.echo(render(cost))
