"""Build deletion tasks for the leak tests: an original repo, its broken and scrubbed workspace.

The deletion is a real one (libcst replaces the function body with ``raise NotImplementedError``, the
docstring kept, as the ``stub`` strategy does); the repos are a tiny one written here and the real
``inflection==0.5.1`` sdist from PyPI.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import git
import libcst as cst

from taskforge.audit.scrub import scrub_workspace

INFLECTION = "inflection==0.5.1"
SDIST_CACHE = Path(os.environ.get("TASKFORGE_TEST_SDISTS", Path.home() / ".cache/taskforge/test-sdists"))

TINY_MODULE = '''"""Text operations."""

import re


def slugify(text: str, sep: str = "-") -> str:
    """Lower-case ``text`` and join its words with ``sep``."""
    words = re.findall(r"[A-Za-z0-9]+", text.lower())
    joined = sep.join(w for w in words if w not in _STOP_WORDS)
    return joined.strip(sep) or "untitled-slug-fallback"


def shout(text: str) -> str:
    """Upper-case and exclaim."""
    return text.upper() + "!"


_STOP_WORDS = frozenset({"a", "an", "the"})
'''

TINY_TEST = '''from minipkg.textops import shout, slugify


def test_slugify():
    assert slugify("The Quick Fox") == "quick-fox"


def test_shout():
    assert shout("hi") == "HI!"
'''


@dataclass(frozen=True)
class LeakTask:
    original: Path  # the original checkout (a git repository with one commit)
    workspace: Path  # what the agent gets: broken, scrubbed, fresh git
    module: str  # workspace-relative path of the module that lost a body
    qualname: str
    deleted: dict[str, str]  # qualname -> original source of the entity
    problem: str  # problem statement: reveals name + signature + docstring

    @property
    def original_module(self) -> Path:
        return self.original / self.module


def run(argv: list[str], cwd: Path | None = None, timeout: float = 300, env: dict | None = None) -> str:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {out[-2000:]}")
    return out


class _Stub(cst.CSTTransformer):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.original = ""
        self.signature = ""

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if original.name.value != self.name:
            return updated
        self.original = cst.Module([]).code_for_node(original)
        self.signature = self.original.lstrip().splitlines()[0]
        body = list(original.body.body)
        doc = body[:1] if original.get_docstring() is not None else []
        raise_stmt = cst.parse_statement("raise NotImplementedError\n")
        return updated.with_changes(body=original.body.with_changes(body=[*doc, raise_stmt]))


def stub_function(source: str, name: str) -> tuple[str, str, str]:
    """(broken source, original def source, signature line) with ``name``'s body deleted."""
    stub = _Stub(name)
    new = cst.parse_module(source).visit(stub)
    assert stub.original, f"no function {name}"
    return new.code, stub.original, stub.signature


def make_task(original: Path, tmp: Path, module: str, qualname: str) -> LeakTask:
    """Commit ``original`` as a repo, copy it to a workspace, delete the body, scrub."""
    if not (original / ".git").exists():
        repo = git.Repo.init(original)
        repo.git.add("-A")
        repo.git.commit("-q", "-m", "original", "--no-verify",
                        env={"GIT_AUTHOR_NAME": "o", "GIT_AUTHOR_EMAIL": "o@x", "GIT_COMMITTER_NAME": "o",
                             "GIT_COMMITTER_EMAIL": "o@x"})
    workspace = tmp / "workspace"
    shutil.copytree(original, workspace, ignore=shutil.ignore_patterns(".git"))
    broken, deleted, signature = stub_function((original / module).read_text(), qualname.rsplit(".", 1)[1])
    (workspace / module).write_text(broken)
    scrub_workspace(workspace, [qualname])
    doc = deleted.split('"""')[1] if '"""' in deleted else ""
    problem = f"Implement `{qualname}`:\n\n```python\n{signature}\n    \"\"\"{doc}\"\"\"\n```\n"
    return LeakTask(original, workspace, module, qualname, {qualname: deleted}, problem)


def tiny_task(tmp: Path) -> LeakTask:
    original = tmp / "original"
    (original / "minipkg").mkdir(parents=True)
    (original / "minipkg" / "__init__.py").write_text("")
    (original / "minipkg" / "textops.py").write_text(TINY_MODULE)
    (original / "tests").mkdir()
    (original / "tests" / "test_textops.py").write_text(TINY_TEST)
    (original / "setup.py").write_text("from setuptools import setup\nsetup(name='minipkg', version='1.0', "
                                       "packages=['minipkg'])\n")
    return make_task(original, tmp, "minipkg/textops.py", "minipkg.textops.slugify")


def inflection_sdist() -> Path:
    """The real ``inflection-0.5.1.tar.gz`` from PyPI (downloaded once, then cached)."""
    SDIST_CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(SDIST_CACHE.glob("inflection-0.5.1.tar.gz"))
    if not found:
        run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--no-cache-dir",
             "-d", str(SDIST_CACHE), INFLECTION], timeout=300)
        found = sorted(SDIST_CACHE.glob("inflection-0.5.1.tar.gz"))
    return found[0]


def inflection_task(tmp: Path) -> LeakTask:
    with tarfile.open(inflection_sdist()) as tf:
        tf.extractall(tmp / "unpacked", filter="data")
    original = tmp / "original"
    shutil.move(tmp / "unpacked" / "inflection-0.5.1", original)
    return make_task(original, tmp, "inflection/__init__.py", "inflection.camelize")
