"""The parent's side of the runner's records channel: the only authority on what a run's tests did.

The runner (``sandboxes/runner/pytest_runner.py``) writes one JSON record per test phase as the phase
ends, on a channel it took before any code of the workspace was imported. ``read_ledger`` turns what
arrived into a ``TestReport``, after the whole process tree of the run is dead. The rules (first record
per phase wins, foreign/late/second records and records under a collector that failed are forged, no
``end`` is an unfinished run, a ``shadow`` record a refused workspace) live in
``sandboxes/runner/records.py``, a stdlib-only module the exported Harbor verifier ships too: one
implementation for every grader. Here they become flags: ``FORGED_RECORDS``, ``NO_REPORT``, ``SHADOWING``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sandboxes.runner.records import Ledger
from taskforge.core.testreport import Outcome, ReportFlag, TestReport, TestResult


def read_ledger(data: bytes | Iterable[bytes], *, exit_code: int | None, elapsed: float, output_tail: str = "",
                timed_out: bool = False, collect_only: bool = False) -> TestReport:
    """The run's ``TestReport`` from the records that arrived (``data``: the channel's bytes or lines)."""
    ledger = Ledger.read(data if isinstance(data, bytes) else list(data))
    flags: list[ReportFlag] = []
    if collect_only:
        flags.append(ReportFlag.COLLECT_ONLY)
        results = tuple(TestResult(n, Outcome.SKIPPED) for n in dict.fromkeys(ledger.collected))
    else:
        results = tuple(TestResult(n, Outcome(o), round(ledger.durations[n], 6)) for n, o in ledger.outcomes.items())
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
    return TestReport(results, code, duration, timed_out, tuple(ledger.collection_errors), tail, tuple(flags),
                      tuple(ledger.preloaded or ()), tuple(ledger.unordered), tuple(ledger.seals))


__all__ = ["read_ledger"]
