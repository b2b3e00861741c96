"""Scrub: golden stub edits (libcst), workspace artefacts, fresh git, the environment's installed copy."""

from __future__ import annotations

from pathlib import Path

import git
import pytest
from _leak_task import tiny_task

from taskforge.audit.scrub import ScrubReport, scrub_stub, scrub_workspace, stub_declarations

STUB = '''import sys
from typing import overload

CONSTANT: int

@overload
def slugify(text: str) -> str: ...
@overload
def slugify(text: bytes) -> bytes: ...

def shout(text: str) -> str: ...  # keep me

class Box:
    size: int
    def slugify(self) -> str: ...

class Only:
    def slugify(self) -> str: ...

if sys.version_info >= (3, 10):
    def slugify2(x: int) -> int: ...
'''


def _stub(tmp_path: Path, rel: str, text: str) -> Path:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_stub_function_and_overloads_removed_rest_byte_for_byte(tmp_path: Path) -> None:
    stub = _stub(tmp_path, "minipkg/textops.pyi", STUB)
    assert stub_declarations(stub, tmp_path, ["minipkg.textops.slugify"]) == ["minipkg.textops.slugify"]
    assert scrub_stub(stub, tmp_path, ["minipkg.textops.slugify"]) == "edited"
    expected = STUB.replace('''@overload
def slugify(text: str) -> str: ...
@overload
def slugify(text: bytes) -> bytes: ...

''', "")
    assert stub.read_text() == expected


def test_stub_method_removed_and_emptied_class_gets_ellipsis(tmp_path: Path) -> None:
    stub = _stub(tmp_path, "minipkg/textops.pyi", STUB)
    targets = ["minipkg.textops.Box.slugify", "minipkg.textops.Only.slugify"]
    assert scrub_stub(stub, tmp_path, targets) == "edited"
    text = stub.read_text()
    assert "class Box:\n    size: int\n\nclass Only:\n    ...\n" in text
    assert "def slugify(text: str)" in text  # the module-level function is another entity


def test_stub_in_version_block_and_stubs_package(tmp_path: Path) -> None:
    stub = _stub(tmp_path, "lib/site-packages/minipkg-stubs/textops.pyi", STUB)
    assert scrub_stub(stub, tmp_path, ["minipkg.textops.slugify2"]) == "edited"
    assert "if sys.version_info >= (3, 10):\n    ...\n" in stub.read_text()


def test_stub_noop_cases(tmp_path: Path) -> None:
    stub = _stub(tmp_path, "minipkg/textops.pyi", STUB)
    assert scrub_stub(stub, tmp_path, ["minipkg.textops.missing"]) == ""  # module matches, name does not
    assert scrub_stub(stub, tmp_path, ["otherpkg.textops.slugify"]) == ""  # another module
    assert stub_declarations(stub, tmp_path, ["otherpkg.textops.slugify"]) == []
    assert stub.read_text() == STUB


def test_stub_of_deleted_module_is_removed(tmp_path: Path) -> None:
    stub = _stub(tmp_path, "minipkg/textops.pyi", STUB)
    assert scrub_stub(stub, tmp_path, ["minipkg.textops"]) == "removed"
    assert not stub.exists()


def _plant_artefacts(ws: Path) -> None:
    files = {
        "minipkg/__pycache__/textops.cpython-311.pyc": b"x", "stray.pyc": b"x", ".coverage.host.1": b"x",
        ".pytest_cache/v/cache/nodeids": b"[]", ".hypothesis/examples/x": b"x", ".ruff_cache/x": b"x",
        ".mypy_cache/3.11/cache.db": b"x", "minipkg.egg-info/PKG-INFO": b"x", "build/lib/minipkg/x.py": b"x",
        "dist/minipkg-1.0.tar.gz": b"x", ".tox/py311/x": b"x", "docs/_build/html/index.html": b"x",
        "site/index.html": b"x", "site/sitemap.xml": b"x", "htmlcov/index.html": b"x",
        "minipkg/textops.cpython-311-x86_64-linux-gnu.so": b"x",
        # kept: a package named build, an extension of another module, a docs source site/ folder
        "minipkg/build/__init__.py": b"", "minipkg/_speedups.cpython-311-x86_64-linux-gnu.so": b"x",
        "docs/site/notes.md": b"x",
    }
    for rel, data in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes(data)


def test_scrub_workspace_removes_artefacts_keeps_sources(tmp_path: Path) -> None:
    t = tiny_task(tmp_path)
    _plant_artefacts(t.workspace)
    report = scrub_workspace(t.workspace, [t.qualname])
    assert set(report.removed) == {
        "minipkg/__pycache__", "stray.pyc", ".coverage.host.1", ".pytest_cache", ".hypothesis", ".ruff_cache",
        ".mypy_cache", "minipkg.egg-info", "build", "dist", ".tox", "docs/_build", "site", "htmlcov",
        "minipkg/textops.cpython-311-x86_64-linux-gnu.so"}
    for kept in ("minipkg/build/__init__.py", "minipkg/_speedups.cpython-311-x86_64-linux-gnu.so",
                 "docs/site/notes.md", "minipkg/textops.py", "tests/test_textops.py"):
        assert (t.workspace / kept).is_file(), kept
    assert ScrubReport.from_dict(report.to_dict()) == report


def test_fresh_git_single_deterministic_commit(tmp_path: Path) -> None:
    a = tiny_task(tmp_path / "a")
    b = tiny_task(tmp_path / "b")
    ra, rb = git.Repo(a.workspace), git.Repo(b.workspace)
    assert ra.head.commit.hexsha == rb.head.commit.hexsha  # same workspace, same sha
    assert [c.hexsha for c in ra.iter_commits("--all")] == [ra.head.commit.hexsha]
    assert not ra.remotes and not ra.tags and not (a.workspace / ".git" / "logs").exists()
    assert not ra.is_dirty(untracked_files=True)
    tracked = set(ra.git.ls_files().splitlines())
    assert "minipkg/textops.py" in tracked
    assert "raise NotImplementedError" in (a.workspace / "minipkg/textops.py").read_text()


def test_git_mode_none_and_bad_mode(tmp_path: Path) -> None:
    t = tiny_task(tmp_path)
    report = scrub_workspace(t.workspace, [t.qualname], git_mode="none")
    assert report.git == "removed" and not (t.workspace / ".git").exists()
    assert scrub_workspace(t.workspace, [t.qualname], git_mode="none").git == "none"
    with pytest.raises(ValueError, match="git_mode"):
        scrub_workspace(t.workspace, [t.qualname], git_mode="squash")


def test_scrub_workspace_replaces_a_gitdir_pointer(tmp_path: Path) -> None:
    t = tiny_task(tmp_path)
    import shutil

    shutil.rmtree(t.workspace / ".git")
    (t.workspace / ".git").write_text(f"gitdir: {t.original / '.git'}\n")
    scrub_workspace(t.workspace, [t.qualname])
    assert (t.workspace / ".git").is_dir()
    assert (t.original / ".git" / "HEAD").is_file()  # the original is never touched
