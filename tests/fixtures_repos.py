"""Builders of small repositories for the mining tests (no checked-in fixture repos).

``make_toy_project(root)`` writes a tiny project whose test suite has one test of every kind the
baseline must tell apart (pass, fail, skip, xfail, setup error, flaky), plus probes of the sandbox's
claims (scrubbed environment, no network). Use ``sandbox_probes=False`` for a suite that only passes.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import git

TOY_MODULE = '''\
"""A toy package."""


def add(a, b):
    """Add two numbers."""
    total = a + b
    return total


def shout(text):
    """Upper-case text."""
    loud = text.upper()
    return loud + "!"


def unused(x):
    """Never called by any test."""
    y = x * 2
    return y
'''

TOY_TESTS = '''\
import pytest

from toypkg import add, shout


def test_add():
    assert add(2, 3) == 5


def test_shout():
    assert shout("hi") == "HI!"


def test_fails():
    assert add(1, 1) == 3


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert shout("a") == "a"


@pytest.fixture
def broken_fixture():
    raise RuntimeError("fixture boom")


def test_setup_error(broken_fixture):
    pass
'''

FLAKY_TEST = '''\
from pathlib import Path

# in the workspace root: a confined run writes only in the workspace, and its test directories are read-only
COUNTER = Path(__file__).resolve().parents[1] / ".flaky.count"


def test_flaky():
    n = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(n + 1))
    assert n % 2 == 0
'''

PROBE_TESTS = '''\
import os
import socket


def test_env_scrubbed():
    assert "TASKFORGE_TEST_SECRET" not in os.environ
    assert os.environ["PYTHONHASHSEED"] == "0"
    assert os.environ["TZ"] == "UTC"
    assert os.environ["HOME"] != {real_home!r}
    assert not any(k.lower().endswith("_proxy") for k in os.environ)


def test_no_network():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(("1.1.1.1", 53))
    except OSError:
        return
    finally:
        s.close()
    raise AssertionError("network reachable from the sandbox")
'''


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text) if rel.endswith((".toml", ".cfg", ".ini", ".txt")) else text)
    return root


def make_toy_project(root: Path, *, flaky: bool = False, sandbox_probes: bool = False,
                     real_home: str = "", installable: bool = False, src_layout: bool = False,
                     failing: bool = True) -> Path:
    """Write the toy project under ``root`` and return ``root``."""
    pkg = "src/toypkg" if src_layout else "toypkg"
    files = {f"{pkg}/__init__.py": TOY_MODULE}
    tests = TOY_TESTS if failing else TOY_TESTS.split("def test_fails")[0]
    files["tests/test_toy.py"] = tests
    if flaky:
        files["tests/test_flaky.py"] = FLAKY_TEST
    if sandbox_probes:
        files["tests/test_probes.py"] = PROBE_TESTS.format(real_home=real_home)
    if installable:
        where = '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n' if src_layout else \
            '\n[tool.setuptools]\npackages = ["toypkg"]\n'
        files["pyproject.toml"] = (
            '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
            '[project]\nname = "toypkg"\nversion = "0.1.0"\n' + where
        )
    return write(root, files)


def make_git_repo(root: Path, files: dict[str, str], message: str = "init") -> git.Repo:
    """Create a git repository at ``root`` with one commit holding ``files``."""
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Test")
        cw.set_value("user", "email", "test@example.com")
        cw.set_value("commit", "gpgsign", "false")
    commit_files(repo, files, message)
    return repo


def commit_files(repo: git.Repo, files: dict[str, str], message: str) -> str:
    write(Path(repo.working_tree_dir or "."), files)
    repo.git.add("--all")
    repo.git.commit("-q", "-m", message)
    return repo.head.commit.hexsha
