"""The baseline: every test's outcome on pristine code over N full-suite runs.

A test whose outcome class differs between runs (or that is missing from some run) is *flaky*; a test
that consistently fails or errors on pristine code is *broken*. Neither is ever used later. Only
``reliable`` tests (passed in every run) can become FAIL_TO_PASS or PASS_TO_PASS.

Test ids are not always stable: a parametrized id can hold ``datetime.now()``, a random value or an
object's memory address (``[<Foo object at 0x7f...>]``). Such an id differs in every run, so it is absent
from the other runs and flaky; an id that carries a memory address or today's date is flaky even when
the baseline runs agree (a validation or a grading, another day or in another process, would name it
differently). A parametrization whose order changes between processes (a set of cases) numbers its ids by
position (``expected23``): once one such id of a function is missing from a run, all of them are flaky.

A test can pass in every plain run and still fail where it counts: graded through the reward path (fresh
grading workspace, read-only test directories, canaries, the grading plugin, strict equality). The
profile grades the original once that way (``taskforge.profile.harness_check``); the reliable tests that
do not pass there move to ``grading_failed`` and the check itself is recorded as a ``GradingCheck``.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from taskforge.core.testreport import Outcome, TestReport

SCHEMA_VERSION = 1

_CLASS = {
    # an xfailed test never counts as passed where it is graded (``Outcome.ok``), so it is not reliable
    Outcome.PASSED: "passed", Outcome.XFAILED: "skipped",
    Outcome.FAILED: "failed", Outcome.ERROR: "failed", Outcome.XPASSED: "failed",
    Outcome.SKIPPED: "skipped", Outcome.MISSING: "missing",
}


@dataclass(frozen=True, slots=True)
class GradingCheck:
    """The original repository graded once through the reward path, all reliable tests in the request."""

    status: str  # "passed" (every reliable test passed) | "dropped" (some did not) | "error" (no verdict)
    #              | "flagged" (the original trips the integrity checks: nothing dropped)
    graded: int = 0  # reliable tests in the request
    failed: int = 0  # of them, not passed: dropped from ``Baseline.passed``
    first: tuple[str, ...] = ()  # the first failing ids (sorted), at most 10
    outcomes: Mapping[str, int] = field(default_factory=dict)  # outcome value -> count, of the failed ones
    detail: str = ""  # the reward's detail and flags, or why the check could not run
    seconds: float = 0.0

    @property
    def line(self) -> str:
        """One line for people: what the check found."""
        if self.status == "error":
            return f"grading-harness check failed (baseline kept): {self.detail}"
        if self.status == "flagged":
            return ("grading-harness check: graded with canaries in every test file, the original trips the "
                    "integrity checks; a task whose hidden tests share that file will fail its gold grading "
                    f"(other tasks are unaffected): {self.detail}")
        if not self.failed:
            return f"all {self.graded} reliable tests pass under the grading harness"
        return (f"{self.failed} tests fail only under the grading harness (dropped from reliable), "
                f"e.g. {list(self.first[:3])}: {self.detail}")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "graded": self.graded, "failed": self.failed, "first": list(self.first),
                "outcomes": dict(self.outcomes), "detail": self.detail, "seconds": round(self.seconds, 3)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GradingCheck:
        return cls(status=str(d.get("status", "")), graded=int(d.get("graded", 0)), failed=int(d.get("failed", 0)),
                   first=tuple(d.get("first", ())), outcomes={str(k): int(v) for k, v in d.get("outcomes", {}).items()},
                   detail=str(d.get("detail", "")), seconds=float(d.get("seconds", 0.0)))


@dataclass(frozen=True, slots=True)
class Baseline:
    runs: int
    passed: frozenset[str]  # passed in every run: the reliable tests
    failed: frozenset[str]  # failed/errored/xpassed in every run: broken on pristine code
    flaky: frozenset[str]  # outcome class changed between runs, or missing from some run
    skipped: frozenset[str]  # skipped or xfailed in every run
    durations: Mapping[str, float] = field(default_factory=dict)  # median seconds per test
    collection_errors: tuple[str, ...] = ()  # files pytest could not collect (union over runs)
    run_seconds: tuple[float, ...] = ()  # wall time of each run
    grading_failed: frozenset[str] = frozenset()  # passed in every run, failed graded (module docstring)
    grading_check: GradingCheck | None = None  # None: the check did not run (older profile, or not asked)

    @property
    def broken(self) -> frozenset[str]:
        return self.failed

    @property
    def reliable(self) -> frozenset[str]:
        return self.passed

    @property
    def all_tests(self) -> frozenset[str]:
        return self.passed | self.failed | self.flaky | self.skipped | self.grading_failed

    def counts(self) -> dict[str, int]:
        return {"passed": len(self.passed), "failed": len(self.failed), "flaky": len(self.flaky),
                "skipped": len(self.skipped)}

    def suite_seconds(self, tests: Sequence[str] | None = None) -> float:
        """Summed median durations of ``tests`` (all reliable tests by default)."""
        chosen = self.passed if tests is None else tests
        return round(sum(self.durations.get(t, 0.0) for t in chosen), 6)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION, "runs": self.runs,
            "passed": sorted(self.passed), "failed": sorted(self.failed), "flaky": sorted(self.flaky),
            "skipped": sorted(self.skipped),
            "durations": {k: round(v, 6) for k, v in sorted(self.durations.items())},
            "collection_errors": list(self.collection_errors), "run_seconds": list(self.run_seconds),
            "grading_failed": sorted(self.grading_failed),
            **({"grading_check": self.grading_check.to_dict()} if self.grading_check is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Baseline:
        return cls(
            runs=int(d["runs"]), passed=frozenset(d.get("passed", ())), failed=frozenset(d.get("failed", ())),
            flaky=frozenset(d.get("flaky", ())), skipped=frozenset(d.get("skipped", ())),
            durations={k: float(v) for k, v in d.get("durations", {}).items()},
            collection_errors=tuple(d.get("collection_errors", ())),
            run_seconds=tuple(float(x) for x in d.get("run_seconds", ())),
            grading_failed=frozenset(d.get("grading_failed", ())),
            grading_check=GradingCheck.from_dict(d["grading_check"]) if d.get("grading_check") else None,
        )

    def with_grading_check(self, check: GradingCheck, failed: frozenset[str]) -> Baseline:
        """This baseline with ``failed`` (reliable tests that did not pass graded) moved out of ``passed``."""
        moved = failed & self.passed
        return dataclasses.replace(self, passed=self.passed - moved, grading_failed=self.grading_failed | moved,
                                   grading_check=check)


_ADDRESS = re.compile(r"0x[0-9a-fA-F]{9,}")  # an object address (0x7f3a2b1c9d10), not a hex literal (0x123abc)
_POSITIONAL = re.compile(r"(?:^|-)[A-Za-z_]\w*?[0-9]+(?=-|\]|$)")  # pytest's argname + index id part


def unstable_ids(reports: Sequence[TestReport], today: datetime.date | None = None) -> frozenset[str]:
    """Ids that a later run would not reproduce (module docstring): missing from some run, or with a
    parameter that holds a memory address or today's date (``datetime.now()`` in a parametrization)."""
    seen = [set(r.outcomes()) for r in reports]
    every = set().union(*seen)
    common = set.intersection(*seen) if seen else set()
    day = (today or datetime.date.today()).isoformat()
    unstable = {n for n in every if n not in common
                or ("[" in n and (_ADDRESS.search(n.split("[", 1)[1]) or day in n.split("[", 1)[1]))}
    # ids numbered by position (``expected23``: pytest's id for a value it cannot render) in a parametrization
    # whose order changes between processes (isodate 0.7.2: TEST_CASES is a set holding None, whose hash is
    # its address): some ids coincide across the baseline runs by chance and name another case in the next
    # process, so every positional id of a function that lost one is unstable
    # a function parametrized over a set (the runner's ``unordered``) is such a function whatever the runs saw
    shifting = {n.split("[", 1)[0] for n in unstable if "[" in n and _POSITIONAL.search(n.split("[", 1)[1])}
    shifting |= {n.split("[", 1)[0] for r in reports for n in r.unordered if "[" in n}
    unstable |= {n for n in every if "[" in n and n.split("[", 1)[0] in shifting
                 and _POSITIONAL.search(n.split("[", 1)[1])}
    return frozenset(unstable)


def compute_baseline(reports: Sequence[TestReport], timing_reports: Sequence[TestReport] | None = None) -> Baseline:
    """Classify every test seen in ``reports``. Durations are medians over ``timing_reports``
    (default: all reports; pass the runs without coverage for honest timings)."""
    if not reports:
        raise ValueError("compute_baseline needs at least one report")
    outcomes = [report.outcomes() for report in reports]
    every = set().union(*outcomes)
    # an id first seen in a later run is missing from the earlier ones (runs 1-2 must count too)
    classes = {n: {_CLASS[seen.get(n, Outcome.MISSING)] for seen in outcomes} for n in every}
    unstable = unstable_ids(reports)
    buckets: dict[str, set[str]] = {"passed": set(), "failed": set(), "skipped": set(), "flaky": set()}
    for nodeid, cls in classes.items():
        if nodeid not in unstable and len(cls) == 1 and (only := next(iter(cls))) != "missing":
            buckets[only].add(nodeid)
        else:
            buckets["flaky"].add(nodeid)
    samples: dict[str, list[float]] = {}
    for report in timing_reports or reports:
        for r in report.results:
            samples.setdefault(r.nodeid, []).append(r.duration)
    errors = tuple(dict.fromkeys(e for r in reports for e in r.collection_errors))
    return Baseline(
        runs=len(reports), passed=frozenset(buckets["passed"]), failed=frozenset(buckets["failed"]),
        flaky=frozenset(buckets["flaky"]), skipped=frozenset(buckets["skipped"]),
        durations={k: statistics.median(v) for k, v in samples.items()},
        collection_errors=errors, run_seconds=tuple(round(r.duration, 3) for r in reports),
    )
