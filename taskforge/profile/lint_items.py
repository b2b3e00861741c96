"""Items of lint and type-check plugins are no reliable test: they check how the code is written, not what it does.

pydash 8.1.0's test extra installs pytest-mypy-testing, whose items (``tests/pytest_mypy_testing/test_objects.py::
[mypy]test_mypy_invoke``) run mypy over the package and compare its messages with comments in the test file. Any
stub or deletion changes what mypy says, so they failed beside every candidate: 19 of 40 candidates were
``suite_red_after_deletion`` on them, 494 s of the run's 835 s of validation, and none could be a FAIL_TO_PASS
test either (a correct patch need not type-check identically). jsonpickle 4.1.4's test extra brings pytest-ruff
(``::ruff`` items). Such items are moved to the baseline's flaky set: never FAIL_TO_PASS nor PASS_TO_PASS, and
counted back when the bench compares pass counts with plain pytest, as flaky tests are.

They are told by their node ids, which these plugins give their items (a test function cannot be named so):
``::[mypy]NAME`` (pytest-mypy-testing), ``::mypy``/``::mypy-status`` (pytest-mypy), ``::ruff``/``::ruff::format``
(pytest-ruff), ``::flake-8::FLAKE8`` (pytest-flake8), ``::BLACK`` (pytest-black), ``::ISORT`` (pytest-isort),
``::PYLINT`` (pytest-pylint), ``::pycodestyle``/``::codestyle``/``::pydocstyle``/``::mccabe``/``::flakes``.
"""

from __future__ import annotations

import dataclasses
import re

from taskforge.profile.baseline import Baseline

_LINT_ITEM = re.compile(r"::(?:\[mypy\][^:]*|mypy|mypy-status|ruff|ruff::format|flake-8::FLAKE8|FLAKE8|flakes"
                        r"|BLACK|black|ISORT|isort|PYLINT|pylint|pycodestyle|codestyle|pydocstyle|mccabe)$")


def is_lint_item(nodeid: str) -> bool:
    """Whether ``nodeid`` names an item of a lint or type-check plugin (module docstring)."""
    return bool(_LINT_ITEM.search(nodeid))


def without_lint_items(baseline: Baseline) -> Baseline:
    """``baseline`` with its passing lint and type-check items moved to ``flaky`` (module docstring)."""
    moved = frozenset(n for n in baseline.passed if is_lint_item(n))
    if not moved:
        return baseline
    return dataclasses.replace(baseline, passed=baseline.passed - moved, flaky=baseline.flaky | moved)
