"""Tests that use subtests (second call record per subTest) are not reliable once a baseline run saw forged records."""

from __future__ import annotations

from pathlib import Path

from taskforge.profile.baseline import Baseline
from taskforge.profile.subtests import subtest_functions, without_subtests

SRC = '''import unittest


class TestTOC(unittest.TestCase):
    def test_quotes(self):
        for q in ['"', "'"]:
            with self.subTest(quote=q):
                self.assertTrue(q)

    def test_plain(self):
        self.assertTrue(True)


def test_fixture(subtests):
    with subtests.test(i=1):
        assert True


def test_other():
    assert True
'''


def test_functions_using_subtests_leave_the_reliable_set(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_toc.py").write_text(SRC)
    assert subtest_functions(tmp_path, ["tests/test_toc.py"]) == {"tests/test_toc.py::TestTOC::test_quotes",
                                                                  "tests/test_toc.py::test_fixture"}
    ids = {"tests/test_toc.py::TestTOC::test_quotes", "tests/test_toc.py::TestTOC::test_plain",
           "tests/test_toc.py::test_fixture", "tests/test_toc.py::test_other"}
    b = Baseline(runs=2, passed=frozenset(ids), failed=frozenset(), flaky=frozenset(), skipped=frozenset())
    after = without_subtests(b, tmp_path, ["tests/test_toc.py"])
    assert after.passed == {"tests/test_toc.py::TestTOC::test_plain", "tests/test_toc.py::test_other"}
    assert after.flaky == {"tests/test_toc.py::TestTOC::test_quotes", "tests/test_toc.py::test_fixture"}
