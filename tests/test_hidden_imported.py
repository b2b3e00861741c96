"""Tests pytest collects in one file but that another file defines (imported by name or ``*``) can be hidden.

lark 1.3.1 sets ``python_files = "__main__.py"``: its tests/__main__.py imports every test class
(``from .test_cache import TestCache``, ``from .test_parser import *``), so every test id is
``tests/__main__.py::Class::test``. With no definition in that file, all 113 candidates whose failing tests
were found ended "generated at collection and cannot be hidden" (0 tasks from 329 decided).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from generators.hidden_tests import hide_tests

MAIN = "import unittest\nfrom .test_cache import TestCache\nfrom .test_more import *\n"
CACHE = ("import unittest\nfrom pkg import f\n\n\nclass TestCache(unittest.TestCase):\n"
         "    def test_a(self):\n        self.assertEqual(f(), 1)\n\n"
         "    def test_b(self):\n        self.assertEqual(f(), 1)\n")
MORE = ('import unittest\n__all__ = ["TestMore"]\n\n\nclass TestMore(unittest.TestCase):\n'
        "    def test_c(self):\n        pass\n\n    def test_d(self):\n        pass\n")


def _repo(tmp: Path) -> Path:
    for rel, text in {"tests/__init__.py": "", "tests/__main__.py": MAIN, "tests/test_cache.py": CACHE,
                      "tests/test_more.py": MORE}.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    return tmp


def test_an_imported_class_is_hidden_where_it_is_defined_and_kept_by_name(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    ids = ["tests/__main__.py::TestCache::test_a", "tests/__main__.py::TestCache::test_b",
           "tests/__main__.py::TestMore::test_c"]
    hidden = hide_tests(repo, ids)
    assert not hidden.unmatched
    assert all(hidden.hides(n) for n in ids) and not hidden.hides("tests/__main__.py::TestMore::test_d")
    assert set(hidden.inherited) == set(ids)  # the caller confirms by collection
    cache = hidden.files_after["tests/test_cache.py"]
    assert cache is not None and "class TestCache" in cache and "def test_" not in cache
    assert "from pkg import f" not in cache  # only the hidden tests used it
    more = hidden.files_after["tests/test_more.py"]
    assert more is not None and "def test_d" in more and "def test_c" not in more
    assert "tests/__main__.py" not in hidden.files_after


@pytest.mark.realrepo
def test_lark_tests_collected_through_main_are_hidden_and_the_rest_still_collect(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    from real_sdists import collected, sdist_copy

    repo = sdist_copy(tmp_path_factory, tmp_path / "lark", "pypi:lark==1.3.1")

    before, _ = collected(repo, "tests")
    hide = {n for n in before if n.startswith("tests/__main__.py::TestCache::")}
    assert len(hide) >= 5, sorted(before)[:5]
    hidden = hide_tests(repo, sorted(hide))
    assert not hidden.unmatched and "tests/test_cache.py" in hidden.files_after
    for rel, text in hidden.files_after.items():
        assert text is not None
        (repo / rel).write_text(text)
    after, _ = collected(repo, "tests")
    assert after == before - hide, (sorted(after - before)[:3], sorted(before - hide - after)[:3])


def test_a_test_file_in_a_newer_pythons_syntax_is_edited_without_dropping_imports(tmp_path: Path) -> None:
    """typeguard 4.6.1: a test module with ``type Foo = list[int]`` (3.12) crashed the candidate (an internal
    error: ``ast.parse`` under 3.11 in the unused-import pass); libcst edits it, the imports stay."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_new.py").write_text(
        "import os\n\ntype Foo = list[int]\n\n\ndef test_a():\n    assert os.sep\n\n\ndef test_b():\n    pass\n")
    hidden = hide_tests(tmp_path, ["tests/test_new.py::test_a"])
    after = hidden.files_after["tests/test_new.py"]
    assert hidden.hidden == ("tests/test_new.py::test_a",)
    assert "def test_a" not in after and "def test_b" in after and "import os" in after and "type Foo" in after


HELPED = ("import unittest\nfrom pkg import f\n\n\nclass Helper:\n    pass\n\n\ndef helper():\n    return Helper()\n\n\n"
          "class TestA(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(f(), helper())\n")
IMPORTER = "from .test_a import helper\n\n\ndef test_b():\n    assert helper()\n"


def test_a_helper_another_test_module_imports_stays_when_its_files_tests_are_hidden(tmp_path: Path) -> None:
    """tenacity 9.2.1: tests/test_asyncio.py does ``from .test_tenacity import NoIOErrorAfterCount, ...``; hiding
    every test of test_tenacity.py removed the file (or the helpers only its tests used), so test_asyncio.py
    stopped collecting and 11 of 42 decided candidates were rejected import_broken."""
    for rel, text in {"tests/__init__.py": "", "tests/test_a.py": HELPED, "tests/test_b.py": IMPORTER}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    hidden = hide_tests(tmp_path, ["tests/test_a.py::TestA::test_a"])
    after = hidden.files_after["tests/test_a.py"]
    assert after is not None and "tests/test_a.py" not in hidden.removed_files
    assert "def helper" in after and "class Helper" in after and "def test_a" not in after
    assert "from pkg import f" not in after  # what only the hidden test used still goes
    # and without an importer the file goes whole, as before
    (tmp_path / "tests/test_b.py").write_text("def test_b():\n    pass\n")
    assert hide_tests(tmp_path, ["tests/test_a.py::TestA::test_a"]).removed_files == ("tests/test_a.py",)


@pytest.mark.realrepo
def test_tenacity_test_asyncio_still_collects_when_test_tenacity_is_hidden(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    from real_sdists import collected, sdist_copy

    from taskforge.validate.workspace_files import remove_whole_files

    repo = sdist_copy(tmp_path_factory, tmp_path / "tenacity", "pypi:tenacity==9.2.1")

    before, _ = collected(repo, "tests/test_tenacity.py", "tests/test_asyncio.py")
    hide = sorted(n for n in before if n.startswith("tests/test_tenacity.py::"))
    assert len(hide) > 50 and any(n.startswith("tests/test_asyncio.py::") for n in before)
    hidden = remove_whole_files(hide_tests(repo, hide), tuple(hide), frozenset(before), repo)
    assert "tests/test_tenacity.py" not in hidden.removed_files
    for rel, text in hidden.files_after.items():
        assert text is not None
        (repo / rel).write_text(text)
    after, tail = collected(repo, "tests/test_tenacity.py", "tests/test_asyncio.py")
    assert after == set(before) - set(hide), tail


def test_a_crlf_test_file_removed_whole_gives_a_setup_patch_that_applies(tmp_path: Path) -> None:
    """fastjsonschema 2.22.3's test files end their lines with CRLF: the text of a file removed whole was read
    with ``read_text()`` (LF), and the setup_patch deleting it did not apply to the real file (every delete
    candidate: gold_failed, ``patch failed: tests/test_compile_to_code.py:1``)."""
    from taskforge.core.patches import apply, diff
    from taskforge.validate.workspace_files import remove_whole_files

    repo = tmp_path / "repo"
    for rel, text in {"pkg.py": "def f():\n    return 1\n", "tests/test_f.py": "from pkg import f\r\n\r\n\r\n"
                      "def test_f():\r\n    assert f() == 1\r\n", "tests/test_g.py": "def test_g():\r\n    pass\r\n"}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(text.encode())
    f2p = ("tests/test_f.py::test_f",)
    hidden = remove_whole_files(hide_tests(repo, f2p), f2p, frozenset({*f2p, "tests/test_g.py::test_g"}), repo)
    assert "tests/test_f.py" in hidden.removed_files
    work = tmp_path / "work"
    shutil.copytree(repo, work)
    apply(diff(hidden.files_before, hidden.files_after), work, what="setup_patch")
    assert not (work / "tests/test_f.py").exists() and (work / "tests/test_g.py").read_bytes().endswith(b"\r\n")


def test_hiding_one_test_of_a_mixin_keeps_the_file_and_the_mixins_other_tests(tmp_path: Path) -> None:
    """frozenlist 1.8.0 defines every test on ``FrozenListMixin`` (not collected itself) and collects them
    through two subclasses: counting only the hidden test as the file's tests removed the file whole, and
    every candidate ended "no test is left to pass" (0 tasks)."""
    text = ("class Mixin:\n    def test_insert(self):\n        pass\n\n    def test_other(self):\n        pass\n\n\n"
            "class TestA(Mixin):\n    pass\n\n\nclass TestB(Mixin):\n    pass\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_m.py").write_text(text)
    hidden = hide_tests(tmp_path, ["tests/test_m.py::TestA::test_insert", "tests/test_m.py::TestB::test_insert"])
    after = hidden.files_after["tests/test_m.py"]
    assert after is not None and not hidden.removed_files
    assert "def test_insert" not in after and "def test_other" in after and "class TestB(Mixin)" in after
