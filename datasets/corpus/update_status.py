"""Rewrite ``STATUS.md``: each corpus package's latest committed measurement, with why it falls short.

    python datasets/corpus/update_status.py

Reads ``RUNS`` (the committed ``taskforge bench corpus`` result folders, oldest first) and takes, per package of
``packages.toml``, the row of the newest folder that has it. ``why.json`` maps ``"NAME@FOLDER"`` to the
explanation of that measurement (what keeps it under the targets); an explanation written for an older
folder is not carried over to a newer measurement. A package no folder has is listed as never run
(``why.json`` key ``NAME``).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RUNS = ("before", "after", "session22", "session23", "session23-15cpu", "session24", "session25", "session26",
        "session29", "session29b", "session29c", "session30", "session31", "session32", "session33", "session34",
        "session35", "session36", "session37", "session38", "session39", "session40", "session41", "session42",
        "session43", "session44", "session45")

HEAD = """# Corpus status: the latest measurement of each package (issue 19)

Each row is the package's most recent `taskforge bench corpus` result among the committed runs
({runs} in this folder), with the code and the CPU-minute budget of that run. Rows from old code or small
budgets are marked so in the "run" column: they are not what today's code gives at 15 CPU-min. *distinct
validated* counts distinct entities among written tasks that hold under `taskforge validate` (accepted in
brackets); 0 (N) means validation was capped or not run, not that N tasks failed. *gap s* is the longest
stretch without a decided candidate after the first one. Regenerate with
`python datasets/corpus/update_status.py` (explanations: `why.json`).

| package | run (code, budget) | status | pass tf/plain | distinct validated (accepted) | CPU-min | gap s | suite-eq/task | why it falls short |
|---|---|---|---|---|---|---|---|---|
"""


def _pass(r: dict[str, Any]) -> str:
    tf, plain = r.get("baseline_passed"), r.get("plain_passed")
    if not tf and r.get("status") == "failed":
        return f"–/{plain}"
    mark = " ✓" if r.get("pass_match") else " ≥" if r.get("pass_at_least") else ""
    return f"{tf}/{plain}{mark}"


def _n(x: Any) -> str:
    return "–" if x is None else f"{x}"


def main() -> None:
    packages = tomllib.loads((HERE / "packages.toml").read_text())["package"]
    why = json.loads((HERE / "why.json").read_text()) if (HERE / "why.json").exists() else {}
    latest: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}
    present = []
    for folder in RUNS:
        path = HERE / folder / "results.json"
        if not path.exists():
            continue
        present.append(f"`{folder}/`")
        data = json.loads(path.read_text())
        for row in data["packages"]:
            latest[row["name"]] = (folder, row, data.get("meta", {}))
    lines = [HEAD.format(runs=", ".join(present))]
    summary = {"rows": 0, "pass": 0, "ten": 0, "gap": 0}
    for pkg in packages:
        name = pkg["name"]
        if name not in latest:
            lines.append(f"| {name} | never run | | | | | | | {why.get(name, 'never run')} |\n")
            continue
        folder, r, meta = latest[name]
        budget = r.get("budget_cpu_min") or meta.get("budget_cpu_min")
        budget_txt = f"{budget:g}" if isinstance(budget, (int, float)) else "?"
        run = f"{folder} ({r.get('commit') or meta.get('commit', '?')}, {budget_txt})"
        distinct = f"{r.get('validated_distinct', 0)} ({r.get('accepted', 0)})"
        cpu = f"{r['cpu_min']:.2f}" if isinstance(r.get("cpu_min"), (int, float)) else "–"
        lines.append(f"| {name} {r.get('version', pkg.get('version'))} | {run} | {r.get('status')} | {_pass(r)} | "
                     f"{distinct} | {cpu} | {_n(r.get('gap_after_first_s'))} | {_n(r.get('suite_eq_per_task'))} | "
                     f"{why.get(f'{name}@{folder}', '')} |\n")
        summary["rows"] += 1
        summary["pass"] += bool(r.get("pass_match"))
        summary["ten"] += (r.get("validated_distinct") or 0) >= 10
        summary["gap"] += (r.get("gap_after_first_s") or 0) > 60
    n = len(packages)
    lines.append(f"\nOver the {n} listed packages ({summary['rows']} measured): same pass count as plain pytest "
                 f"{summary['pass']}/{n}; ≥ 10 distinct validated {summary['ten']}/{n}; a gap over 60 s after "
                 f"the first verdict {summary['gap']}.\n")
    (HERE / "STATUS.md").write_text("".join(lines))


if __name__ == "__main__":
    main()
