"""Statements that are enough: names the hidden tests use are stated, undetermined values are flagged."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from feature_fixtures import TEST_GEO, make_profile

from generators.feature_groups import FeatureBounds
from generators.problem_statement import write_statement
from generators.statement_check import check_statement, flagged_line, flagged_share, hidden_code
from generators.strategy_feature import FeatureStrategy


def _is_test(path: str) -> bool:
    return path.startswith("tests/")


@pytest.fixture()
def task_parts(tmp_path: Path):
    profile = make_profile(tmp_path / "repo")
    strategy = FeatureStrategy(FeatureBounds())
    cand = next(c for c in strategy.propose(profile) if c.candidate_id == "feature:tests/test_geo.py")
    d = strategy.delete_candidate(cand, profile)
    original = {**d.files_before, "tests/test_geo.py": TEST_GEO}
    broken = {**d.files_after, "tests/test_geo.py": None}  # every test of the file is hidden
    return profile, d, original, broken


def test_hidden_code_is_the_removed_test_lines() -> None:
    original = {"tests/t.py": "a\nb\nc\n", "pkg/x.py": "code\n", "tests/gone.py": "g\n"}
    broken = {"tests/t.py": "a\nc\n", "pkg/x.py": "", "tests/gone.py": None}
    assert hidden_code(original, broken, _is_test).splitlines() == ["g", "b"]


def test_undetermined_message_is_added_and_names_are_given(task_parts) -> None:
    profile, d, original, broken = task_parts
    statement = write_statement(d, profile.index, profile.repo_dir, repo="pkg")
    check = check_statement(statement, d.deleted, profile.index, profile.repo_dir, original, broken, _is_test)
    assert check.missing == ()  # the interface statement already gives Circle, area and area_cm
    assert check.undetermined == ("radius must not be negative",)  # only the deleted body held it
    assert check.flagged and not check.rejected
    assert "`radius must not be negative`" in check.statement
    assert check.statement.endswith("Do not change the tests; they will be run against your implementation.\n")
    again = check_statement(check.statement, d.deleted, profile.index, profile.repo_dir, original, broken, _is_test)
    assert not again.flagged and again.statement == check.statement  # completing is idempotent


def test_missing_interface_is_added_with_path_and_signature(task_parts) -> None:
    profile, d, original, broken = task_parts
    check = check_statement("# Implement geometry\n", d.deleted, profile.index, profile.repo_dir, original, broken,
                            _is_test)
    assert set(check.missing) == {"pkg.geo.area", "pkg.geo.Circle", "pkg.units.area_cm"}  # _square: tests never name it
    assert "`pkg.units.area_cm` (function in `pkg/units.py`)" in check.statement and "def area_cm(r)" in check.statement
    stub = check_statement("# Implement geometry\n", d.deleted, profile.index, profile.repo_dir, original, broken,
                           _is_test, names_visible=True)
    assert stub.missing == ()


def test_too_many_undetermined_values_reject(task_parts) -> None:
    profile, d, original, broken = task_parts
    check = check_statement("", d.deleted, profile.index, profile.repo_dir, original, broken, _is_test,
                            max_undetermined=0)
    assert check.rejected and "radius must not be negative" in check.rejected
    assert not check_statement("", d.deleted, profile.index, profile.repo_dir, original, broken, _is_test,
                               max_undetermined=-1).rejected


def test_flagged_share_per_repository_and_strategy() -> None:
    def task(repo: str, strategy: str, flagged: bool | None) -> SimpleNamespace:
        prov = {} if flagged is None else {"statement_check": {"flagged": flagged}}
        return SimpleNamespace(repo=repo, strategy=strategy, provenance=prov)

    tasks = [task("a", "feature", True), task("a", "feature", False), task("a", "delete", False),
             task("b", "feature", None)]
    assert flagged_share(tasks) == {("a", "delete"): (0, 1), ("a", "feature"): (1, 2)}
    assert flagged_line(tasks) == "statements flagged (then completed): a/delete 0/1 (0%), a/feature 1/2 (50%)"
    assert flagged_line([]) == ""


@pytest.mark.timeout(60)
def test_the_removed_test_lines_of_a_large_file_of_alike_tests_come_quickly() -> None:
    """idna 3.20's generated test file: thousands of alike tests, a blank line every third, every third test
    hidden. ``difflib``'s matcher took minutes on it (``autojunk=False``); the lines removed are found exactly."""
    from taskforge.core.linediff import opcodes

    tests = [f"    def test_{i}(self):\n        self.assertEqual(f('{i}'), '{i * 7}')\n" for i in range(6000)]
    before = "import unittest\n\nclass T(unittest.TestCase):\n\n" + "\n".join(tests)
    kept = [t for i, t in enumerate(tests) if i % 3]
    after = "import unittest\n\nclass T(unittest.TestCase):\n\n" + "\n".join(kept)
    removed = hidden_code({"tests/test_x.py": before}, {"tests/test_x.py": after}, _is_test).splitlines()
    code = [line for line in removed if line.strip()]
    assert code == [line for i, t in enumerate(tests) if not i % 3 for line in t.splitlines()]
    a, b = before.splitlines(), after.splitlines()
    rebuilt = [line for tag, i1, i2, j1, j2 in opcodes(a, b) for line in (a[i1:i2] if tag == "equal" else b[j1:j2])]
    assert rebuilt == b
