"""Lint and type-check plugin items are never graded (``taskforge.profile.lint_items``)."""

from __future__ import annotations

from taskforge.profile.baseline import Baseline
from taskforge.profile.lint_items import is_lint_item, without_lint_items


def test_lint_and_type_check_items_are_told_by_their_node_ids() -> None:
    for nodeid in ("tests/pytest_mypy_testing/test_objects.py::[mypy]test_mypy_invoke",  # pydash 8.1.0
                   "tests/jsonpickle_test.py::ruff", "tests/jsonpickle_test.py::ruff::format",  # jsonpickle 4.1.4
                   "src/pkg/mod.py::mypy", "src/pkg/mod.py::mypy-status", "pkg/a.py::flake-8::FLAKE8",
                   "pkg/a.py::BLACK", "pkg/a.py::ISORT", "pkg/a.py::PYLINT", "pkg/a.py::pycodestyle"):
        assert is_lint_item(nodeid), nodeid
    for nodeid in ("tests/test_a.py::test_mypy", "tests/test_a.py::TestRuff::test_ruff",
                   "tests/test_a.py::test_x[ruff]", "tests/test_a.py::test_black[BLACK]"):
        assert not is_lint_item(nodeid), nodeid


def test_passing_lint_items_leave_the_reliable_tests_for_the_flaky_set() -> None:
    """pydash 8.1.0: its pytest-mypy-testing items failed beside every stub (19 of 40 candidates
    ``suite_red_after_deletion``, 494 s): they are no PASS_TO_PASS test now."""
    mypy = "tests/pytest_mypy_testing/test_arrays.py::[mypy]test_mypy_chunk"
    base = Baseline(runs=2, passed=frozenset({"tests/test_a.py::test_x", mypy}), failed=frozenset(),
                    flaky=frozenset({"tests/test_a.py::test_y"}), skipped=frozenset(), durations={})
    out = without_lint_items(base)
    assert out.passed == {"tests/test_a.py::test_x"} and out.flaky == {"tests/test_a.py::test_y", mypy}
    clean = Baseline(runs=2, passed=frozenset({"tests/test_a.py::test_x"}), failed=frozenset(),
                     flaky=frozenset(), skipped=frozenset(), durations={})
    assert without_lint_items(clean) is clean
