"""Tests a project marks flaky leave the reliable set (``taskforge.profile.declared_flaky``).

zipp 4.1.2's ``@pytest.mark.flaky`` big-O timing test passed in the profile's runs and failed under load in
``taskforge validate``: 2 of 6 tasks scored 0 on their gold patch."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from taskforge.profile.baseline import Baseline
from taskforge.profile.declared_flaky import declared_flaky, without_declared_flaky

MARKED = textwrap.dedent("""
    import unittest
    import pytest
    from flaky import flaky

    class TestTiming(unittest.TestCase):
        @pytest.mark.flaky
        def test_big_o(self):
            pass

        def test_plain(self):
            pass

    @pytest.mark.flaky(reruns=3)
    def test_rerun():
        pass

    @flaky(max_runs=3)
    def test_plugin():
        pass

    @pytest.mark.flaky
    class TestAll:
        def test_one(self):
            pass

    class TestMarkedBody:
        pytestmark = [pytest.mark.slow, pytest.mark.flaky]

        def test_two(self):
            pass

    @pytest.mark.parametrize("x", [1, 2])
    def test_steady(x):
        pass
    """)


def _baseline(passed: set[str]) -> Baseline:
    return Baseline(runs=1, passed=frozenset(passed), failed=frozenset(), flaky=frozenset(), skipped=frozenset())


def test_each_way_of_marking_a_test_flaky_is_found_and_steady_tests_stay(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_t.py").write_text(MARKED)
    (tmp_path / "tests" / "test_module.py").write_text("import pytest\npytestmark = pytest.mark.flaky\n\n"
                                                        "def test_m():\n    pass\n")
    found = declared_flaky(tmp_path, ["tests/test_t.py", "tests/test_module.py"])
    assert found == {"tests/test_t.py::TestTiming::test_big_o", "tests/test_t.py::test_rerun",
                     "tests/test_t.py::test_plugin", "tests/test_t.py::TestAll::test_one",
                     "tests/test_t.py::TestMarkedBody::test_two", "tests/test_module.py"}
    steady = {"tests/test_t.py::TestTiming::test_plain", "tests/test_t.py::test_steady[1]",
              "tests/test_t.py::test_steady[2]"}
    moved = {"tests/test_t.py::TestTiming::test_big_o", "tests/test_t.py::test_rerun",
             "tests/test_module.py::test_m", "tests/test_t.py::TestAll::test_one"}
    after = without_declared_flaky(_baseline(steady | moved), tmp_path, ["tests/test_t.py", "tests/test_module.py"])
    assert after.reliable == steady and after.flaky == moved


@pytest.mark.realrepo
def test_zipps_big_o_timing_test_is_never_graded(tmp_path: Path) -> None:
    from generators.sources import resolve_source

    snap = resolve_source("pypi:zipp==4.1.2", tmp_path / "work")
    timing = "tests/test_complexity.py::TestComplexity::test_implied_dirs_performance"
    after = without_declared_flaky(_baseline({timing, "tests/test_path.py::TestPath::test_stem"}), Path(snap.path),
                                   ["tests/test_complexity.py", "tests/test_path.py"])
    assert after.reliable == {"tests/test_path.py::TestPath::test_stem"} and after.flaky == {timing}
