"""The parent's ledger of a run's records (``sandboxes/ledger.py``): the only authority on outcomes."""

from __future__ import annotations

import json

from sandboxes.ledger import read_ledger
from taskforge.core.testreport import Outcome, ReportFlag


def _lines(*records: dict) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


HELLO = {"k": "hello", "pid": 1}
END = {"k": "end", "exit": 0, "dur": 0.5}


def _phases(nodeid: str, call: str = "passed", xfail: bool = False) -> list[dict]:
    return [{"k": "phase", "id": nodeid, "when": "setup", "outcome": "passed", "xfail": False, "dur": 0.0},
            {"k": "phase", "id": nodeid, "when": "call", "outcome": call, "xfail": xfail, "dur": 0.1},
            {"k": "phase", "id": nodeid, "when": "teardown", "outcome": "passed", "xfail": False, "dur": 0.0}]


def test_an_honest_run() -> None:
    r = read_ledger(_lines(HELLO, *_phases("t.py::a"), *_phases("t.py::b", "failed"),
                           *_phases("t.py::c", "skipped", xfail=True), END), exit_code=1, elapsed=1.0)
    assert r.outcomes() == {"t.py::a": Outcome.PASSED, "t.py::b": Outcome.FAILED, "t.py::c": Outcome.XFAILED}
    assert r.flags == () and r.exit_code == 0 and r.duration == 0.5


def test_a_second_record_for_a_phase_is_forged_and_the_first_wins() -> None:
    forged = {"k": "phase", "id": "t.py::a", "when": "call", "outcome": "passed", "xfail": False, "dur": 0.0}
    r = read_ledger(_lines(HELLO, forged, *_phases("t.py::a", "failed"), END), exit_code=0, elapsed=1.0)
    assert ReportFlag.FORGED_RECORDS in r.flags
    assert r.outcomes()["t.py::a"] is Outcome.PASSED  # first wins; the flag zeroes the grading anyway


def test_foreign_lines_and_records_after_end_are_forged() -> None:
    for data in (_lines(HELLO, *_phases("t.py::a"), END) + b"===== 1 passed =====\n",
                 _lines(HELLO, *_phases("t.py::a"), END, *_phases("t.py::b")),
                 _lines(*_phases("t.py::a"), HELLO, END)):
        assert ReportFlag.FORGED_RECORDS in read_ledger(data, exit_code=0, elapsed=1.0).flags


def test_no_end_means_the_run_never_finished_and_a_test_without_teardown_is_missing() -> None:
    r = read_ledger(_lines(HELLO, *_phases("t.py::a"), *_phases("t.py::b")[:2]), exit_code=None, elapsed=3.0,
                    timed_out=True)
    assert ReportFlag.NO_REPORT in r.flags and r.timed_out
    assert set(r.outcomes()) == {"t.py::a"}  # b's call "passed" but it never tore down


def test_results_for_a_file_that_failed_to_collect_are_forged() -> None:
    r = read_ledger(_lines(HELLO, {"k": "collect_error", "id": "t_mul.py"}, *_phases("t_mul.py::test_mul"), END),
                    exit_code=1, elapsed=1.0)
    assert ReportFlag.FORGED_RECORDS in r.flags and "t_mul.py::test_mul" not in r.outcomes()


def _sub(nodeid: str, outcome: str) -> dict:
    return {"k": "phase", "id": nodeid, "when": "call", "outcome": outcome, "xfail": False, "dur": 0.0, "sub": 1}


def test_subtest_records_merge_worst_outcome_wins_and_are_not_forged() -> None:
    setup, call, teardown = _phases("t.py::T::test_many")
    r = read_ledger(_lines(HELLO, setup, _sub("t.py::T::test_many", "passed"), _sub("t.py::T::test_many", "failed"),
                           _sub("t.py::T::test_many", "passed"), call, teardown,
                           *_phases("t.py::T::test_one"), END), exit_code=1, elapsed=1.0)
    assert r.flags == ()  # markdown's unittest subTest: one call record per sub-case is honest
    assert r.outcomes() == {"t.py::T::test_many": Outcome.FAILED, "t.py::T::test_one": Outcome.PASSED}


def test_a_subtest_record_cannot_raise_an_outcome_and_after_teardown_is_forged() -> None:
    setup, call, teardown = _phases("t.py::a", "failed")
    r = read_ledger(_lines(HELLO, setup, _sub("t.py::a", "passed"), call, _sub("t.py::a", "passed"), teardown,
                           END), exit_code=1, elapsed=1.0)
    assert r.outcomes()["t.py::a"] is Outcome.FAILED and r.flags == ()
    late = read_ledger(_lines(HELLO, *_phases("t.py::a"), _sub("t.py::a", "passed"), END), exit_code=0, elapsed=1.0)
    assert ReportFlag.FORGED_RECORDS in late.flags
