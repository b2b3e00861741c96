"""The warm server's cache of assert-rewritten test modules gives the outcomes rewriting each time gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandboxes.fakes import HostSandbox
from sandboxes.protocol import RunRequest
from taskforge.core.environment import EnvSpec

TESTS = '''\
import sys


def test_rewritten():
    x = 1
    assert x == 2


def test_code_names_this_file():
    assert sys._getframe().f_code.co_filename == __file__
'''

WARNS = '''\
def test_tuple_assert():
    assert (1 == 2, "always true: a rewrite-time warning")
'''


def _workspace(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture()
def box():
    sandbox = HostSandbox()
    yield sandbox
    if sandbox._server is not None:
        sandbox._server.close()


def _entries(box: HostSandbox) -> set[str]:
    return {p.name for p in box._server.rewrite_cache.iterdir()}


def _run(box: HostSandbox, ws: Path, tests: tuple[str, ...]):
    env = box.prepare(EnvSpec("demo", "3.11", "", test_paths=("tests",)), ws)
    return box.run(env, ws, RunRequest(tests=tests, timeout_s=120, tracebacks=True)).report


def test_a_cached_module_is_rewritten_and_named_for_the_run_that_loads_it(box, tmp_path):
    ids = ("tests/test_demo.py::test_rewritten", "tests/test_demo.py::test_code_names_this_file")
    first = _workspace(tmp_path / "a", {"tests/test_demo.py": TESTS})
    a = _run(box, first, ids)
    written = _entries(box)  # the test module's, and the rewritten plugins' of this interpreter
    assert written
    second = tmp_path / "b"
    shutil.copytree(first, second)  # same bytes, another path: loaded from the cache
    b = _run(box, second, ids)
    assert a.outcomes() == b.outcomes()
    assert b.outcome_of(ids[1]).ok and not b.outcome_of(ids[0]).ok
    assert "assert 1 == 2" in b.output_tail  # the loaded code still has pytest's rewritten asserts
    assert _entries(box) == written


def test_other_bytes_of_the_same_size_are_not_served_a_stale_entry(box, tmp_path):
    ws = _workspace(tmp_path / "a", {"tests/test_demo.py": TESTS})
    test = "tests/test_demo.py::test_rewritten"
    assert not _run(box, ws, (test,)).outcome_of(test).ok
    (ws / "tests/test_demo.py").write_text(TESTS.replace("x == 2", "x == 1"))  # same size, same second
    assert _run(box, ws, (test,)).outcome_of(test).ok


def test_a_rewrite_that_warns_is_never_cached_so_an_error_filter_still_errors(box, tmp_path):
    ws = _workspace(tmp_path / "a", {"tests/test_warns.py": WARNS})
    test = "tests/test_warns.py::test_tuple_assert"
    assert _run(box, ws, (test,)).outcome_of(test).ok  # only a warning: the tuple is truthy
    (ws / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    report = _run(box, ws, (test,))  # the same bytes, rewritten again: the warning is an error now
    assert report.collection_errors and not report.outcome_of(test).ok
