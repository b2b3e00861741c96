"""The parent's side of the runner's records channel: the only authority on what a run's tests did.

The runner (``sandboxes/runner/pytest_runner.py``) writes one JSON record per test phase as the phase
ends, on a channel it took before any code of the workspace was imported. ``read_ledger`` turns what
arrived into a ``TestReport``, after the whole process tree of the run is dead:

- the first record of each (test, phase) wins; a second one is **forged** (an honest runner writes each
  once: a second can only come from code of the run writing on the channel);
- a line that is not a record, a record before ``hello`` or after ``end``: forged;
- no ``end``: the run never finished (killed, exited early, crashed): ``NO_REPORT``, with the results
  that did arrive;
- a ``shadow`` record: the runner refused a workspace module that hides an installed one: ``SHADOWING``;
- a test record under a collector that failed (a file that did not import): forged (pytest runs
  nothing of it).

A test is in the report once its teardown record came (pytest always tears down what it set up): a
test whose run was cut short is missing, never "passed" on the strength of its setup.
Outcomes per test: the worst phase wins (error in setup/teardown, failed call, skipped, xfailed/xpassed
from pytest's ``wasxfail``), as pytest's own summary counts them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from taskforge.core.testreport import Outcome, ReportFlag, TestReport, TestResult

_RANK = {Outcome.PASSED: 0, Outcome.SKIPPED: 1, Outcome.XFAILED: 1, Outcome.XPASSED: 2, Outcome.FAILED: 3,
         Outcome.ERROR: 4}
_KINDS = frozenset({"hello", "collect_error", "collected", "phase", "shadow", "end"})
_PHASES = frozenset({"setup", "call", "teardown"})


def phase_outcome(when: str, outcome: str, xfail: bool) -> Outcome | None:
    """One phase's outcome (``None``: a passed setup/teardown says nothing about the test)."""
    if when == "call":
        if outcome == "passed":
            return Outcome.XPASSED if xfail else Outcome.PASSED
        if outcome == "skipped":
            return Outcome.XFAILED if xfail else Outcome.SKIPPED
        return Outcome.FAILED
    if outcome == "failed":
        return Outcome.ERROR
    if outcome == "skipped":
        return Outcome.XFAILED if xfail else Outcome.SKIPPED
    return None


@dataclass(slots=True)
class _Ledger:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    partial: dict[str, Outcome] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    seen: set[tuple[str, str]] = field(default_factory=set)
    collection_errors: list[str] = field(default_factory=list)
    collected: list[str] = field(default_factory=list)
    forged: list[str] = field(default_factory=list)
    shadows: list[str] = field(default_factory=list)
    hello: bool = False
    end: dict[str, object] | None = None

    def take(self, line: bytes) -> None:
        try:
            rec = json.loads(line)
            kind = rec["k"]
        except (ValueError, KeyError, TypeError):
            self.forged.append(f"not a record: {line[:80]!r}")
            return
        if kind not in _KINDS or (not self.hello and kind != "hello") or self.end is not None:
            self.forged.append(f"record out of place: {line[:80]!r}")
            return
        try:
            getattr(self, f"_{kind}")(rec)
        except (KeyError, TypeError, ValueError):
            self.forged.append(f"malformed record: {line[:80]!r}")

    def _hello(self, rec: dict[str, object]) -> None:
        if self.hello:
            raise ValueError("second hello")
        self.hello = True

    def _collect_error(self, rec: dict[str, object]) -> None:
        self.collection_errors.append(str(rec["id"]))

    def _collected(self, rec: dict[str, object]) -> None:
        self.collected.extend(str(i) for i in rec["ids"])  # type: ignore[attr-defined]

    def _shadow(self, rec: dict[str, object]) -> None:
        self.shadows.extend(str(p) for p in rec["paths"])  # type: ignore[attr-defined]

    def _end(self, rec: dict[str, object]) -> None:
        self.end = {"exit": int(rec["exit"]), "dur": float(rec["dur"])}  # type: ignore[arg-type]

    def _phase(self, rec: dict[str, object]) -> None:
        nodeid, when = str(rec["id"]), str(rec["when"])
        if when not in _PHASES:
            raise ValueError(when)
        if (nodeid, when) in self.seen:
            self.forged.append(f"second {when} record for {nodeid}")
            return
        self.seen.add((nodeid, when))
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + float(rec.get("dur", 0.0))  # type: ignore[arg-type]
        got = phase_outcome(when, str(rec["outcome"]), bool(rec.get("xfail")))
        current = self.partial.setdefault(nodeid, Outcome.PASSED)
        if got is not None and _RANK[got] >= _RANK[current]:
            self.partial[nodeid] = current = got
        if when == "teardown":
            self.outcomes[nodeid] = current


def read_ledger(data: bytes | Iterable[bytes], *, exit_code: int | None, elapsed: float, output_tail: str = "",
                timed_out: bool = False, collect_only: bool = False) -> TestReport:
    """The run's ``TestReport`` from the records that arrived (``data``: the channel's bytes or lines)."""
    ledger = _Ledger()
    lines = data.splitlines() if isinstance(data, bytes) else data
    for line in lines:
        if line.strip():
            ledger.take(line.strip())
    broken = tuple(e for e in ledger.collection_errors if e != "<session>")
    for nodeid in [n for n in ledger.outcomes if any(n == e or n.startswith(e + "::") for e in broken)]:
        ledger.forged.append(f"a result for {nodeid}, whose file failed to collect")
        del ledger.outcomes[nodeid]
    flags: list[ReportFlag] = []
    if collect_only:
        flags.append(ReportFlag.COLLECT_ONLY)
        results = tuple(TestResult(n, Outcome.SKIPPED) for n in dict.fromkeys(ledger.collected))
    else:
        results = tuple(TestResult(n, o, round(ledger.durations[n], 6)) for n, o in ledger.outcomes.items())
    if ledger.end is None:
        flags.append(ReportFlag.NO_REPORT)
    if ledger.forged:
        flags.append(ReportFlag.FORGED_RECORDS)
    if ledger.shadows:
        flags.append(ReportFlag.SHADOWING)
    code = int(ledger.end["exit"]) if ledger.end is not None else (exit_code if exit_code is not None else -9)  # type: ignore[call-overload]
    duration = float(ledger.end["dur"]) if ledger.end is not None else elapsed  # type: ignore[arg-type]
    notes = [f"[taskforge: forged records: {'; '.join(ledger.forged[:3])}]"] if ledger.forged else []
    if ledger.shadows:
        notes.append(f"[taskforge: refused: the workspace shadows installed modules: {', '.join(ledger.shadows[:5])}]")
    tail = "\n".join([output_tail, *notes]).strip()
    return TestReport(results, code, duration, timed_out, tuple(ledger.collection_errors), tail, tuple(flags))


__all__ = ["phase_outcome", "read_ledger"]
