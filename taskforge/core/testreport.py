"""Per-test outcomes of one test-suite run, as reported by the in-sandbox runner.

The runner (``sandboxes/runner/pytest_runner.py``) writes a JSON report; ``TestReport.from_json`` reads it.
These are the values every later stage (baseline, validation, reward) reasons about.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class Outcome(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # setup/teardown error or collection error of the test's file
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    XPASSED = "xpassed"
    MISSING = "missing"  # asked for, but never reported (not collected, runner died, ...)

    @property
    def ok(self) -> bool:
        """True only for ``passed``: xfailed, xpassed, skipped, failed, error and missing tests all count as
        not passing (a stub that calls ``pytest.xfail`` or ``pytest.skip`` implements nothing)."""
        return self is Outcome.PASSED


@dataclass(frozen=True, slots=True)
class TestResult:
    nodeid: str
    outcome: Outcome
    duration: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"nodeid": self.nodeid, "outcome": self.outcome.value, "duration": round(self.duration, 6)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TestResult:
        return cls(str(d["nodeid"]), Outcome(d["outcome"]), float(d.get("duration", 0.0)))


class ReportFlag(enum.StrEnum):
    """What a report says about the run itself (not about one test)."""

    NO_REPORT = "no_report"  # the run never finished its report: killed, exited early, crashed
    COLLECT_ONLY = "collect_only"  # only collected: every test is reported "skipped"
    FORGED_RECORDS = "forged_records"  # records on the channel that the runner did not write (tampering)
    SHADOWING = "shadowing"  # refused: a new workspace module hides a stdlib or installed module
    OOM_KILLED = "oom_killed"  # the sandbox killed the run for its memory


@dataclass(frozen=True, slots=True)
class TestReport:
    """What one run of the suite (or of selected node ids) produced."""

    results: tuple[TestResult, ...]
    exit_code: int
    duration: float
    timed_out: bool = False
    collection_errors: tuple[str, ...] = ()
    output_tail: str = ""
    flags: tuple[ReportFlag, ...] = field(default=())
    # workspace files already imported when pytest was about to load conftests (the runner's ``preloaded``)
    preloaded: tuple[str, ...] = ()
    # tests parametrized over a set (the runner's ``unordered``): their positional ids may shift between runs
    unordered: tuple[str, ...] = ()
    # (node id, token, value) of each sealed assertion the run reached (the runner's ``seal`` records)
    seals: tuple[tuple[str, str, Any], ...] = ()
    # node id -> outcome, built on first use: ``outcome_of`` in a loop over a large run's tests was quadratic
    _index: dict[str, Outcome] | None = field(default=None, init=False, repr=False, compare=False)

    __test__ = False  # not a pytest test class

    def outcomes(self) -> dict[str, Outcome]:
        """Node id -> outcome (a fresh dict the caller may change)."""
        return dict(self._outcomes())

    def _outcomes(self) -> dict[str, Outcome]:
        if self._index is None:
            object.__setattr__(self, "_index", {r.nodeid: r.outcome for r in self.results})
        return self._index  # type: ignore[return-value]

    def outcome_of(self, nodeid: str) -> Outcome:
        return self._outcomes().get(nodeid, Outcome.MISSING)

    def with_missing(self, expected: Iterable[str]) -> TestReport:
        """Add MISSING results for expected node ids that did not report."""
        seen = self._outcomes()
        extra = tuple(TestResult(n, Outcome.MISSING) for n in expected if n not in seen)
        if not extra:
            return self
        return TestReport(
            self.results + extra, self.exit_code, self.duration, self.timed_out,
            self.collection_errors, self.output_tail, self.flags, self.preloaded, self.unordered, self.seals,
        )

    def nodeids(self, *outcomes: Outcome) -> frozenset[str]:
        return frozenset(r.nodeid for r in self.results if not outcomes or r.outcome in outcomes)

    def all_ok(self, nodeids: Iterable[str]) -> bool:
        out = self._outcomes()
        return all(out.get(n, Outcome.MISSING).ok for n in nodeids)

    def none_ok(self, nodeids: Iterable[str]) -> bool:
        out = self._outcomes()
        return not any(out.get(n, Outcome.MISSING).ok for n in nodeids)

    def counts(self) -> dict[str, int]:
        c: dict[str, int] = {}
        for r in self.results:
            c[r.outcome.value] = c.get(r.outcome.value, 0) + 1
        return c

    def to_dict(self) -> dict[str, Any]:
        return {
            "results": [r.to_dict() for r in self.results],
            "exit_code": self.exit_code,
            "duration": round(self.duration, 6),
            "timed_out": self.timed_out,
            "collection_errors": list(self.collection_errors),
            "output_tail": self.output_tail,
            "flags": list(self.flags),
            "preloaded": list(self.preloaded),
            **({"unordered": list(self.unordered)} if self.unordered else {}),
            **({"seals": [list(s) for s in self.seals]} if self.seals else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TestReport:
        return cls(
            results=tuple(TestResult.from_dict(r) for r in d.get("results", ())),
            exit_code=int(d.get("exit_code", -1)),
            duration=float(d.get("duration", 0.0)),
            timed_out=bool(d.get("timed_out", False)),
            collection_errors=tuple(d.get("collection_errors", ())),
            output_tail=str(d.get("output_tail", "")),
            flags=tuple(ReportFlag(f) for f in d.get("flags", ())),
            preloaded=tuple(d.get("preloaded", ())),
            unordered=tuple(d.get("unordered", ())),
            seals=tuple((str(n), str(t), v) for n, t, v in d.get("seals", ())),
        )

    @classmethod
    def crashed(cls, *, exit_code: int, duration: float, output_tail: str, timed_out: bool = False) -> TestReport:
        """A run that produced no report at all (runner died, timed out before writing)."""
        return cls((), exit_code, duration, timed_out, (), output_tail, (ReportFlag.NO_REPORT,))
