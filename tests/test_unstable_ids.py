"""Unstable test ids (time, random or memory-address parameters) never become reliable tests."""

from __future__ import annotations

import dataclasses
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


def test_positional_ids_of_a_parametrization_whose_order_changes_are_all_flaky() -> None:
    """isodate 0.7.2: ``TEST_CASES`` is a set holding None (hashed by address), so its order, and the index in
    ids like ``test_format[4-1985-04-12-expected23-%Y-%m-%d]``, changes per process; ids that coincided in the
    baseline runs by chance were kept as PASS_TO_PASS, and 30 of 50 decided candidates failed on 32 missing ones
    (0 tasks)."""
    t = "tests/test_date.py::test_format[4-{}-expected{}-%Y]"
    run1 = report("a", t.format("1985", 22), t.format("1986", 23), t.format("1987", 24), t.format("x", "None"),
                  "tests/test_date.py::test_other[utf8]")
    run2 = report("a", t.format("1985", 23), t.format("1986", 22), t.format("1987", 24), t.format("x", "None"),
                  "tests/test_date.py::test_other[utf8]")
    unstable = unstable_ids([run1, run2])
    assert t.format("1987", 24) in unstable  # the same name in both runs, by chance
    assert t.format("x", "None") not in unstable and "tests/test_date.py::test_other[utf8]" not in unstable
    assert compute_baseline([run1, run2]).passed == {"a", t.format("x", "None"), "tests/test_date.py::test_other[utf8]"}


def test_a_function_whose_ids_agree_keeps_its_positional_ids() -> None:
    t = "t.py::test_obj[obj{}]"
    runs = [report(t.format(0), t.format(1)), report(t.format(0), t.format(1))]
    assert unstable_ids(runs) == frozenset()


def test_the_runners_word_on_a_set_parametrization_makes_its_positional_ids_flaky_when_runs_agree() -> None:
    """Two baseline runs of isodate agree on every ``expected23`` id about half the time (the None member's
    hash is its address): the runner's ``unordered`` record decides, not the chance of a disagreement."""
    t = "tests/test_date.py::test_format[4-{}-expected{}-%Y]"
    ids = (t.format("1985", 22), t.format("1986", 23), "tests/test_date.py::test_other[utf8]")
    runs = [dataclasses.replace(report(*ids), unordered=ids[:2]), report(*ids)]
    assert unstable_ids(runs) == set(ids[:2])
    assert compute_baseline(runs).passed == {ids[2]}
