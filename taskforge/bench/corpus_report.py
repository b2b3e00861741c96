"""What one corpus package's run produced, read back from its files, and the corpus table and targets.

Everything here reads plain JSON files (the profile, the candidate journal, generate's ``--json``
line, validate's ``--json`` line) so that a result can be taken from a run that was killed at any
point, and from runs of older and newer taskforge versions alike (BEFORE/AFTER tables).

Definitions (the targets of issue 19):

- **pass count**: reliable passing tests of the profile's baseline (passed in every run; an xfailed test is never
  graded as passed, so it is not reliable) vs ``passed`` of plain pytest in a fresh venv (``datasets/corpus/plain_pytest.json``).
- **distinct entities**: tasks keyed by what they ask to implement (``task_key``): the candidate's entity, plus
  the users stubbed with it in a bigger task; a stub and a delete task of the same entity (twins, whatever
  private helpers go with the delete) count once, a bigger task counts apart from the stub of its target.
  Records without provenance fall back to the sorted tuple of entities they delete.
- **decided candidate**: one journal file (``OUT/.journal/<repo>/*.json``), its time its mtime.
  ``longest_gap_s`` is the longest stretch of the run (from its start, through every decision, to its
  end) without one; ``gap_after_first_s`` the same from the first decision on (profiling left out).
- **covered candidate -> task share**: accepted / decided (a journaled candidate had covering tests;
  candidates without any are rejected before validation and never journaled).
- **suite-equivalents per task**: summed sandbox test time of every decided candidate / the wall time
  of one full-suite run (baseline median) / accepted candidates.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

YIELD_TASKS = 10  # distinct validated tasks a package should give (issue 19 item 2)
GAP_LIMIT_S = 60.0
SUITE_EQ_TARGET = 2.0


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class PackageResult:
    """One package's row; ``None`` where the run never got that far."""

    name: str
    version: str
    size: str = "small"
    status: str = "failed"  # ok | failed | cpu_cap | wall_cap
    error: str = ""  # first error line
    rc: int | None = None
    cpu_min: float = 0.0
    wall_s: float = 0.0
    budget_cpu_min: float = 0.0
    plain_passed: int | None = None
    baseline_passed: int | None = None
    baseline_total: int | None = None
    baseline_flaky: int | None = None
    collection_errors: int | None = None
    suite_s: float | None = None
    candidates: int | None = None  # proposed (from generate's summary; None when it did not finish)
    decided: int = 0
    accepted: int = 0  # accepted decisions in the journal (written or not)
    accepted_distinct: int = 0
    tasks_written: int = 0
    tasks_by_strategy: Mapping[str, int] = field(default_factory=dict)  # tasks in the dataset
    funnel: Mapping[str, int] = field(default_factory=dict)
    funnel_from: str = "journal"  # summary (all candidates, incl. pre-rejected) | journal (decided only)
    first_decision_s: float | None = None
    longest_gap_s: float | None = None
    gap_after_first_s: float | None = None
    test_s: float = 0.0
    suite_eq_per_task: float | None = None
    validate_status: str = "skipped"  # ok | broken | failed | cpu_cap | wall_cap | skipped
    holds: int | None = None
    validated_distinct: int = 0  # distinct entities among written tasks that hold
    validate_cpu_min: float = 0.0
    leftovers: int = 0  # processes that outlived the run and were killed by the bench
    baseline_grading_failed: int | None = None  # passed every baseline run, failed graded (profile.harness_check)
    grading_check: str = ""  # the profile's grading-check line
    commit: str = ""  # the taskforge commit this package ran on (a resumed benchmark may span several)
    plain_skipped: int | None = None  # tests plain pytest skipped (plain_pytest.json)

    @property
    def pass_match(self) -> bool:
        """Equal pass counts, counting the tests the baseline set aside as flaky or unstable (a parametrized
        id with a timestamp in it, a test that failed in one of its runs: plain pytest ran each once) and the
        tests dropped because they fail only under the grading harness (they passed plainly)."""
        if self.plain_passed is None or self.baseline_passed is None:
            return False
        passed = self.baseline_passed + (self.baseline_grading_failed or 0)
        return passed <= self.plain_passed <= passed + (self.baseline_flaky or 0)

    @property
    def pass_at_least(self) -> bool:
        """``pass_match``, or more passes than plain pytest by no more than the tests it skipped: the
        environment installed an optional dependency plain's venv lacked (tabulate's wcwidth/numpy tests)."""
        if self.pass_match:
            return True
        if self.plain_passed is None or self.baseline_passed is None or self.plain_skipped is None:
            return False
        passed = self.baseline_passed + (self.baseline_grading_failed or 0)
        return self.plain_passed < passed <= self.plain_passed + self.plain_skipped

    @property
    def yield_met(self) -> bool:
        return self.validated_distinct >= YIELD_TASKS

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass_match"], d["yield_met"], d["pass_at_least"] = self.pass_match, self.yield_met, self.pass_at_least
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PackageResult:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def distinct_entities(entity_lists: Iterable[Sequence[str]]) -> int:
    """Tasks about distinct entities: twins (same entities, other strategy) count once."""
    return len({tuple(sorted(e)) for e in entity_lists})


_SINGLE_ENTITY_STRATEGIES = frozenset({"stub", "delete", "module"})


def task_key(task: Mapping[str, Any]) -> tuple[str, ...]:
    """What a task (a task dict, or a written record with ``key``) asks to implement (module docstring)."""
    if task.get("key"):
        return tuple(task["key"])
    prov = task.get("provenance") or {}
    if isinstance(prov, str):  # a journal's task row keeps it as JSON text
        try:
            prov = json.loads(prov)
        except ValueError:
            prov = {}
    cand = prov.get("candidate") or {} if isinstance(prov, dict) else {}
    if cand.get("entity") and cand.get("strategy") in _SINGLE_ENTITY_STRATEGIES:
        return (str(cand["entity"]), *sorted(prov.get("stubbed_dependents", ())))
    return tuple(sorted(task.get("entities", ())))


def distinct_tasks(tasks: Iterable[Mapping[str, Any]]) -> int:
    """Tasks about distinct entities (``task_key``): twins count once, bigger tasks apart."""
    return len({task_key(t) for t in tasks})


def longest_gaps(start: float, decisions: Sequence[float], end: float) -> tuple[float, float | None]:
    """(longest stretch without a decision over the whole run, the same from the first decision on)."""
    times = sorted(t for t in decisions if start <= t <= end + 5)
    points = [start, *times, max(end, times[-1] if times else end)]
    whole = max(b - a for a, b in zip(points, points[1:], strict=False))
    after = points[1:]
    return round(whole, 1), (round(max(b - a for a, b in zip(after, after[1:], strict=False)), 1)
                             if times and len(after) > 1 else None)


def read_journal(dataset: Path) -> list[tuple[float, dict[str, Any]]]:
    """(mtime, entry) of every decided candidate under ``dataset/.journal``; unreadable files skipped."""
    entries = []
    for path in sorted(Path(dataset).glob(".journal/*/*.json")):
        try:
            entries.append((path.stat().st_mtime, json.loads(path.read_text())))
        except (OSError, ValueError):
            continue
    return entries


def find_profile(work: Path, name: str, version: str) -> Path | None:
    """The profile directory of ``name==version`` in the work area ``work`` (never its pure-Python variant's)."""
    for meta in sorted(Path(work).glob("profiles/*/profile.json")):
        try:
            data = json.loads(meta.read_text())
            snap = data.get("snapshot", {})
            if data.get("env", {}).get("spec", {}).get("compiled_extensions") is False:
                continue
        except (OSError, ValueError, AttributeError):
            continue
        if canonical(str(snap.get("name", ""))) == canonical(name) and str(snap.get("version")) == version:
            return meta.parent
    return None


def baseline_numbers(profile: Path | None) -> dict[str, Any]:
    if profile is None:
        return {}
    try:
        b = json.loads((profile / "baseline.json").read_text())
    except (OSError, ValueError):
        return {}
    from taskforge.profile.baseline import GradingCheck

    check = GradingCheck.from_dict(b["grading_check"]) if b.get("grading_check") else None
    runs = [float(x) for x in b.get("run_seconds", [])]
    if len(runs) == 1 and check is not None and check.status != "error" and check.seconds > 0:
        runs = [check.seconds]  # the coverage run alone (``baseline_more_runs_max_s``) is no plain suite run
    runs = runs[1:] or runs
    kinds = ("passed", "failed", "flaky", "skipped", "grading_failed")
    line = "" if check is None else check.line if check.status != "passed" else f"passed: {check.line}"
    return {"baseline_passed": len(b.get("passed", [])), "baseline_flaky": len(b.get("flaky", [])),
            "baseline_grading_failed": len(b.get("grading_failed", [])), "grading_check": line[:300],
            "baseline_total": sum(len(b.get(k, [])) for k in kinds),
            "collection_errors": len(b.get("collection_errors", [])),
            "suite_s": round(sorted(runs)[len(runs) // 2], 3) if runs else None}


def _json_objects(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The lines of a log that are whole JSON objects, parsed, in the order given."""
    for line in lines:
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                yield json.loads(line)
            except ValueError:
                continue


def last_json_line(text: str) -> dict[str, Any] | None:
    return next(_json_objects(reversed(text.splitlines())), None)


def task_verdicts(text: str) -> dict[str, Any]:
    """What a ``taskforge validate --json`` log says before its summary line: ``held`` and ``broken`` instance
    ids of the tasks whose verdict it printed (a validation killed at its cap still counts those), and
    ``holding``; ``{}`` when it printed none."""
    held: list[str] = []
    broken: list[str] = []
    for row in _json_objects(text.splitlines()):
        if isinstance(row, dict) and "instance_id" in row and "holds" in row:
            (held if row["holds"] else broken).append(str(row["instance_id"]))
    if not held and not broken:
        return {}
    return {"holding": len(held), "held": held, "broken": broken, "partial": True}


def first_error_line(text: str) -> str:
    """The line a user would quote: taskforge's ``error:`` line, else a traceback's last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if ln.lower().startswith(("error:", "error ")):
            return ln[:300]
    for i, ln in enumerate(lines):
        if ln.startswith("Traceback"):
            tail = [x for x in lines[i + 1:] if not x.startswith(("File ", "^", "~"))]
            return (tail[-1] if tail else ln)[:300]
    return ""


def collect(name: str, version: str, *, dataset: Path, work: Path, log_text: str, start: float, end: float,
            status: str, rc: int | None, cpu_s: float, written: Sequence[Mapping[str, Any]],
            validate: Mapping[str, Any] | None = None, **extra: Any) -> PackageResult:
    """Assemble a package's result from its run's files. ``written``: {instance_id, strategy, entities}
    of the tasks in its dataset; ``validate``: validate's ``--json`` object plus ``status``."""
    summary = last_json_line(log_text) or {}
    source = (summary.get("sources") or [{}])[0]
    journal = read_journal(dataset)
    tasks = [e["task"] for _t, e in journal if e.get("task")]
    reasons = Counter(e["rejected"]["reason"] for _t, e in journal if e.get("rejected"))
    base = baseline_numbers(find_profile(work, name, version))
    whole, after = longest_gaps(start, [t for t, _e in journal], end)
    first = min((t for t, _e in journal), default=None)
    test_s = sum(float(e.get("test_seconds", 0.0)) for _t, e in journal)
    suite = base.get("suite_s")
    broken = set((validate or {}).get("broken", []))
    holds = (validate or {}).get("holding")
    if (validate or {}).get("partial"):  # validation was cut: only the tasks it saw hold count
        seen = set((validate or {}).get("held", []))
        held = [w for w in written if w["instance_id"] in seen]
    else:
        held = [w for w in written if w["instance_id"] not in broken] if holds is not None else []
    error = source.get("error") or (first_error_line(log_text) if status != "ok" else "")
    return PackageResult(
        name, version, status=status, error=str(error).splitlines()[0][:300] if error else "", rc=rc,
        cpu_min=round(cpu_s / 60, 2), wall_s=round(end - start, 1),
        candidates=source.get("candidates"), decided=len(journal), accepted=len(tasks),
        accepted_distinct=distinct_tasks(tasks),
        tasks_written=len(written), tasks_by_strategy=dict(Counter(w["strategy"] for w in written)),
        funnel=dict(source["funnel"]) if "funnel" in source else dict(reasons),
        funnel_from="summary" if "funnel" in source else "journal",
        first_decision_s=round(first - start, 1) if first is not None else None,
        longest_gap_s=whole, gap_after_first_s=after, test_s=round(test_s, 1),
        suite_eq_per_task=round(test_s / suite / len(tasks), 2) if tasks and suite else None,
        validate_status=str((validate or {}).get("status", "skipped")), holds=holds,
        validated_distinct=distinct_tasks(held), **base, **extra)


def targets(results: Sequence[PackageResult]) -> dict[str, Any]:
    """The issue's targets over ``results``."""
    n = len(results)
    with_plain = [r for r in results if r.plain_passed is not None]
    decided, accepted = sum(r.decided for r in results), sum(r.accepted for r in results)
    test_eq = sum(r.suite_eq_per_task * r.accepted for r in results if r.suite_eq_per_task is not None)
    eq_tasks = sum(r.accepted for r in results if r.suite_eq_per_task is not None)
    return {
        "packages": n, "ok": sum(r.status == "ok" for r in results),
        "pass_match": sum(r.pass_match for r in with_plain), "pass_match_of": len(with_plain),
        "pass_match_pct": round(100 * sum(r.pass_match for r in with_plain) / len(with_plain), 1) if with_plain else None,
        "pass_at_least": sum(r.pass_at_least for r in with_plain),
        "yield_met": sum(r.yield_met for r in results),
        "yield_met_pct": round(100 * sum(r.yield_met for r in results) / n, 1) if n else None,
        "gap_over_60s": sorted(r.name for r in results if (r.longest_gap_s or 0) > GAP_LIMIT_S),
        "gap_after_first_over_60s": sorted(r.name for r in results if (r.gap_after_first_s or 0) > GAP_LIMIT_S),
        "decided": decided, "accepted": accepted,
        "covered_to_task_share": round(accepted / decided, 3) if decided else None,
        "suite_eq_per_task": round(test_eq / eq_tasks, 2) if eq_tasks else None,
        "tasks_written": sum(r.tasks_written for r in results),
        "holds": sum(r.holds or 0 for r in results),
        "cpu_min": round(sum(r.cpu_min for r in results), 1),
    }


def _match_note(r: PackageResult) -> str:
    """What makes a matching pass count equal: tests dropped as fail-only-graded, flaky/unstable ids."""
    parts = [f"+{r.baseline_grading_failed} fail only graded"] if r.baseline_grading_failed else []
    if (r.baseline_passed or 0) + (r.baseline_grading_failed or 0) != r.plain_passed:
        parts.append(f"{r.baseline_flaky} flaky")
    return f" ({', '.join(parts)})" if parts else ""


def _funnel_text(funnel: Mapping[str, int], top: int = 3) -> str:
    items = sorted(funnel.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ", ".join(f"{k}={v}" for k, v in items) or "-"


def _n(x: Any) -> str:
    return "-" if x is None else str(x)


def render_markdown(results: Sequence[PackageResult], meta: Mapping[str, Any]) -> str:
    """The corpus table, the target lines and one line per error (outside the table)."""
    t = targets(results)
    head = ("package", "size", "status", "pass tf/plain", "cand", "decided", "acc", "written s/d/m", "distinct",
            "holds", "CPU-min", "1st s", "gap s", "suite-eq/task", "top rejections")
    label = f" ({meta['label']})" if meta.get("label") else ""
    lines = [f"# Corpus benchmark{label}", "",
             f"Command: `{meta.get('command', '')}`  ", f"Taskforge commit: {meta.get('commit', '?')}; "
             f"budget {meta.get('budget_cpu_min', '?')} CPU-min per package; started {meta.get('started', '?')}.",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        s = r.tasks_by_strategy
        tf = f"{_n(r.baseline_passed)}/{_n(r.plain_passed)}" + (
            " ✓" + _match_note(r) if r.pass_match else
            f" ≥ (+{(r.baseline_passed or 0) + (r.baseline_grading_failed or 0) - (r.plain_passed or 0)} that plain "
            "pytest skipped)" if r.pass_at_least else "")
        at = f" (@{r.commit})" if r.commit and r.commit != meta.get("commit") else ""
        row = (f"{r.name} {r.version}{at}", r.size, r.status, tf, _n(r.candidates), str(r.decided), str(r.accepted),
               f"{s.get('stub', 0)}/{s.get('delete', 0)}/{s.get('module', 0)}",
               f"{r.validated_distinct} ({r.accepted_distinct})", _n(r.holds) + (f"/{r.tasks_written}" if r.holds is not None else ""),
               f"{r.cpu_min:.1f}", _n(r.first_decision_s), _n(r.gap_after_first_s), _n(r.suite_eq_per_task),
               _funnel_text(r.funnel) + (" (journal)" if r.funnel_from == "journal" and r.funnel else ""))
        lines.append("| " + " | ".join(row) + " |")
    pct = t["pass_match_pct"]
    lines += ["", "Columns: *pass tf/plain* reliable baseline passes vs plain pytest (✓ equal; ✓ (N flaky): equal once the N test ids the baseline set aside as flaky or unstable are counted, as plain pytest's single run counts them); *cand* proposed "
              "candidates (- when the run did not finish); *decided*/*acc* journaled verdicts / accepted; "
              "*written* tasks in the dataset by strategy; *distinct* distinct entities among written tasks that "
              "hold under `taskforge validate` (in brackets: among all accepted); *1st s* seconds to the first "
              "verdict (profiling); *gap s* longest stretch without a verdict after the first one, to the end of "
              "the run; *suite-eq/task* sandbox test time of all verdicts in full-suite runs per accepted one.",
              "", "## Targets (issue 19)", "",
              f"- pass count equals plain pytest: {t['pass_match']}/{t['pass_match_of']} = {_n(pct)}% (target ≥ 90%); "
              f"at least plain's (≥: more passes, no more than the tests plain pytest skipped): "
              f"{t['pass_at_least']}/{t['pass_match_of']}",
              f"- ≥ {YIELD_TASKS} validated tasks about distinct entities within the budget: {t['yield_met']}/{t['packages']} "
              f"= {_n(t['yield_met_pct'])}% (target ≥ 80%)",
              f"- longest stretch without a decided candidate > {GAP_LIMIT_S:.0f} s (whole run, profiling included): "
              f"{len(t['gap_over_60s'])} ({', '.join(t['gap_over_60s']) or 'none'}); after the first verdict: "
              f"{len(t['gap_after_first_over_60s'])} ({', '.join(t['gap_after_first_over_60s']) or 'none'}) (target 0)",
              f"- covered candidate -> task share: {t['accepted']}/{t['decided']} = {_n(t['covered_to_task_share'])} "
              "(target: double the BEFORE share)",
              f"- full-suite-equivalents of test time per accepted task: {_n(t['suite_eq_per_task'])} "
              f"(target ≤ {SUITE_EQ_TARGET:g})",
              f"- status: {t['ok']}/{t['packages']} ok; {t['tasks_written']} tasks written, {t['holds']} hold; "
              f"{t['cpu_min']} CPU-min in all"]
    harness = [r for r in results if r.baseline_grading_failed or (r.grading_check and not r.grading_check.startswith("passed"))]
    if harness:
        lines += ["", "## Grading-harness check (the original graded once; failing reliable tests dropped)", ""]
        lines += [f"- {r.name}: {r.grading_check.replace('`', chr(39))}" for r in harness]
    errors = [r for r in results if r.error]
    if errors:
        lines += ["", "## Errors (first line)", ""]
        lines += [f"- {r.name} ({r.status}): `{r.error.replace('`', chr(39))}`" for r in errors]
    return "\n".join(lines) + "\n"
