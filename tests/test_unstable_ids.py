"""Unstable test ids (time, random or memory-address parameters) never become reliable tests."""

from __future__ import annotations

import datetime

from taskforge.core.testreport import Outcome, TestReport
from taskforge.core.testreport import TestResult as Result
from taskforge.profile.baseline import compute_baseline, unstable_ids

P = Outcome.PASSED


def report(*ids: str) -> TestReport:
    return TestReport(tuple(Result(n, P, 0.1) for n in ids), exit_code=0, duration=1.0)


def test_an_id_seen_only_in_the_last_run_is_flaky_not_reliable() -> None:
    # marshmallow 4.4.0: test_invalid_datetime_deserialization[<datetime.now()>] changes every run
    t = "tests/test_d.py::test_invalid_dt[{}]"
    runs = [report("a", t.format("09:07:21")), report("a", t.format("09:07:22")), report("a", t.format("09:07:23"))]
    b = compute_baseline(runs)
    assert b.passed == {"a"}
    assert b.flaky == {t.format(s) for s in ("09:07:21", "09:07:22", "09:07:23")}


def test_memory_address_and_todays_date_ids_are_flaky_even_when_runs_agree() -> None:
    addr = "t.py::test_obj[<Foo object at 0x7f3a2b1c9d10>]"
    today = datetime.date.today().isoformat()
    dated = f"t.py::test_when[{today}]"
    fixed = "t.py::test_when[2001-01-01]"
    runs = [report("a", addr, dated, fixed), report("a", addr, dated, fixed)]
    assert unstable_ids(runs) == {addr, dated}
    b = compute_baseline(runs)
    assert b.passed == {"a", fixed}
    assert addr in b.flaky and dated in b.flaky


def test_addresses_outside_the_parameters_do_not_count() -> None:
    runs = [report("tests/test_0xdeadbeef00.py::test_x", "t.py::test_numeric_literal[0x123abc-1194684]")]
    assert unstable_ids(runs) == frozenset()
    assert compute_baseline(runs).passed == {"tests/test_0xdeadbeef00.py::test_x",
                                             "t.py::test_numeric_literal[0x123abc-1194684]"}  # jinja2's hex literal
