"""The parent's reading of the runner's records channel. Standalone: stdlib only.

One implementation for every grader: ``sandboxes/ledger.py`` turns a ``Ledger`` into a ``TestReport`` for
the local and docker sandboxes, and the exported Harbor verifier ships this file (``tests/harbor_records.py``)
and reads its run's channel with it. The rules (the runner, ``pytest_runner.py``, writes one JSON record
per test phase as the phase ends, on a channel it took before any workspace code was imported):

- the first record of each (test, phase) wins; a second one is **forged** (an honest runner writes each
  once: a second can only come from code of the run writing on the channel);
- a line that is not a record, a record before ``hello`` or after ``end``: forged;
- no ``end``: the run never finished (killed, exited early, crashed);
- a subtest record (``"sub": 1``, one per unittest ``subTest``): merged worst-outcome-wins into its test,
  so it can lower an outcome but never raise one;
- a ``shadow`` record: the runner refused a workspace module that hides an installed one;
- a ``dupes`` record: the runner deselected tests whose node id several collected items share (kept as
  a note: it can only remove tests, never report one);
- an ``unordered`` record: tests parametrized over a set, whose positional ids may name another case in
  the next process (read from the profile's baseline runs only; it can only make tests unreliable);
- a ``preloaded`` record: the workspace files already imported when pytest is about to load conftests
  (a project pytest itself imports: iniconfig, packaging); one per run, a second is forged; read from the
  profile's original run only, never from a grading;
- a ``seal`` record: the value a sealed assertion saw (``taskforge.reward.seals``), under the running test's
  id; only the grader knows what it must equal, so one written by the graded code gains it nothing;
- a test record under a collector that failed (a file or class that did not import): forged (pytest runs
  nothing of it, and without this rule such records would stand and that file's canaries be excused).

A test is in ``outcomes`` once its teardown record came (pytest always tears down what it set up): a
test whose run was cut short is missing, never "passed" on the strength of its setup. Outcomes per test:
the worst phase wins (error in setup/teardown, failed call, skipped, xfailed/xpassed from pytest's
``wasxfail``), as pytest's own summary counts them. Outcome values are ``TestReport``'s: ``passed``,
``failed``, ``error``, ``skipped``, ``xfailed``, ``xpassed``.
"""

from __future__ import annotations

import json

RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "xpassed": 2, "failed": 3, "error": 4}
KINDS = frozenset({"hello", "collect_error", "collected", "unordered", "phase", "shadow", "dupes", "preloaded", "seal",
                   "end"})
PHASES = frozenset({"setup", "call", "teardown"})


def phase_outcome(when: str, outcome: str, xfail: bool) -> str | None:
    """One phase's outcome (``None``: a passed setup/teardown says nothing about the test)."""
    if when == "call":
        if outcome == "passed":
            return "xpassed" if xfail else "passed"
        if outcome == "skipped":
            return "xfailed" if xfail else "skipped"
        return "failed"
    if outcome == "failed":
        return "error"
    if outcome == "skipped":
        return "xfailed" if xfail else "skipped"
    return None


class Ledger:
    """What the records say; see the module docstring. ``Ledger.read(data)`` reads a whole channel."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.partial: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.seen: set[tuple[str, str]] = set()
        self.collection_errors: list[str] = []
        self.collected: list[str] = []
        self.unordered: list[str] = []
        self.forged: list[str] = []
        self.shadows: list[str] = []
        self.duplicated: list[str] = []
        self.preloaded: list[str] | None = None
        self.seals: list[tuple[str, str, object]] = []
        self.hello = False
        self.end: dict[str, float] | None = None

    def take(self, line: bytes) -> None:
        try:
            rec = json.loads(line)
            kind = rec["k"]
        except (ValueError, KeyError, TypeError):
            self.forged.append(f"not a record: {line[:80]!r}")
            return
        if kind not in KINDS or (not self.hello and kind != "hello") or self.end is not None:
            self.forged.append(f"record out of place: {line[:80]!r}")
            return
        try:
            getattr(self, f"_{kind}")(rec)
        except (KeyError, TypeError, ValueError, AttributeError):
            self.forged.append(f"malformed record: {line[:80]!r}")

    def _hello(self, rec: dict) -> None:
        if self.hello:
            raise ValueError("second hello")
        self.hello = True

    def _collect_error(self, rec: dict) -> None:
        self.collection_errors.append(str(rec["id"]))

    def _collected(self, rec: dict) -> None:
        self.collected.extend(str(i) for i in rec["ids"])

    def _unordered(self, rec: dict) -> None:
        self.unordered.extend(str(i) for i in rec["ids"])

    def _shadow(self, rec: dict) -> None:
        self.shadows.extend(str(p) for p in rec["paths"])

    def _dupes(self, rec: dict) -> None:
        self.duplicated.extend(str(i) for i in rec["ids"])

    def _preloaded(self, rec: dict) -> None:
        if self.preloaded is not None:
            self.forged.append("second preloaded record")
            return
        self.preloaded = [str(f) for f in rec["files"]]

    def _seal(self, rec: dict) -> None:
        self.seals.append((str(rec["id"]), str(rec["t"]), rec.get("v")))

    def _end(self, rec: dict) -> None:
        self.end = {"exit": int(rec["exit"]), "dur": float(rec["dur"])}

    def _phase(self, rec: dict) -> None:
        nodeid, when = str(rec["id"]), str(rec["when"])
        if when not in PHASES:
            raise ValueError(when)
        if rec.get("sub"):
            self._subtest(nodeid, rec)
            return
        if (nodeid, when) in self.seen:
            self.forged.append(f"second {when} record for {nodeid}")
            return
        self.seen.add((nodeid, when))
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + float(rec.get("dur", 0.0))
        got = phase_outcome(when, str(rec["outcome"]), bool(rec.get("xfail")))
        current = self.partial.setdefault(nodeid, "passed")
        if got is not None and RANK[got] >= RANK[current]:
            self.partial[nodeid] = current = got
        if when == "teardown":
            self.outcomes[nodeid] = current

    def _subtest(self, nodeid: str, rec: dict) -> None:
        """A sub-case of a running test (unittest ``subTest``): many per test, merged worst-outcome-wins.

        Such a record can only lower a test's outcome, never raise it, so one written by the graded code
        gains it nothing; one that comes after the test's teardown is out of place.
        """
        if (nodeid, "teardown") in self.seen:
            self.forged.append(f"a subtest record for {nodeid} after its teardown")
            return
        got = phase_outcome("call", str(rec["outcome"]), bool(rec.get("xfail")))
        current = self.partial.setdefault(nodeid, "passed")
        if got is not None and got != "skipped" and RANK[got] > RANK[current]:
            self.partial[nodeid] = got

    def impossible(self) -> list[str]:
        """Tests reported although their file (or class) failed to collect: no honest run reports those."""
        broken = [c for c in self.collection_errors if c and c != "<session>"]
        return sorted(n for n in set(self.partial) if any(n == c or n.startswith(c + "::") or n.split("::")[0] == c
                                                          for c in broken))

    @classmethod
    def read(cls, data: bytes | list[bytes]) -> Ledger:
        ledger = cls()
        for line in data.splitlines() if isinstance(data, bytes) else data:
            if line.strip():
                ledger.take(line.strip())
        for nodeid in ledger.impossible():
            ledger.forged.append(f"a record for {nodeid}, whose file failed to collect")
            ledger.outcomes.pop(nodeid, None)
        return ledger
