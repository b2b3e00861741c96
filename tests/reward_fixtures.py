"""Test seams for the reward tests: a hand-built stub task from a real tree.

Runs go through ``sandboxes.fakes.SubprocessSandbox`` (the real runner, this interpreter).
``build_stub_task`` turns an original tree into a task the way the generator does (stub one function,
FAIL_TO_PASS = tests that then fail, hide them, patches from ``git diff``).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from sandboxes.fakes import SubprocessSandbox
from sandboxes.protocol import RunRequest
from taskforge.core.environment import EnvSpec
from taskforge.core.task import Difficulty, Task
from taskforge.core.testreport import TestReport

GIT = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=60).stdout


def stub_function(path: Path, name: str) -> None:
    """Replace the body of top-level function ``name`` with ``raise NotImplementedError`` (docstring kept)."""
    source = path.read_text()
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = source.splitlines()
    first = fn.body[0]
    keep_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    start = (first.end_lineno if keep_doc else first.lineno - 1) or 0
    indent = " " * (first.col_offset)
    lines[start:fn.end_lineno] = [f"{indent}raise NotImplementedError"]
    path.write_text("\n".join(lines) + "\n")


def remove_functions(path: Path, names: set[str]) -> None:
    source = path.read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    spans = [(min([n.lineno] + [d.lineno for d in n.decorator_list]) - 1, n.end_lineno or n.lineno)
             for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    for start, end in sorted(spans, reverse=True):
        del lines[start:end]
    path.write_text("\n".join(lines) + "\n")


def _run_pytest(workspace: Path, spec: EnvSpec) -> TestReport:
    env = SubprocessSandbox().prepare(spec, workspace)
    return SubprocessSandbox().run(env, workspace, RunRequest(tests=spec.test_paths, timeout_s=300)).report


def build_stub_task(original: Path, work: Path, *, module: str, function: str, spec: EnvSpec,
                    repo: str) -> Task:
    """A stub task from ``original`` (left untouched): broken = stubbed + hidden tests removed."""
    repo_dir = work / "build"
    shutil.copytree(original, repo_dir, symlinks=True)
    git(repo_dir, "init", "-q")
    git(repo_dir, "add", "-A")
    git(repo_dir, "commit", "-qm", "original")
    base = git(repo_dir, "rev-parse", "HEAD").strip()
    stub_function(repo_dir / module, function)
    report = _run_pytest(repo_dir, spec)
    f2p = tuple(sorted(r.nodeid for r in report.results if not r.outcome.ok))
    p2p = tuple(sorted(r.nodeid for r in report.results if r.outcome.ok))
    assert f2p and p2p, report.counts()
    by_file: dict[str, set[str]] = {}
    for nodeid in f2p:
        file, _, name = nodeid.partition("::")
        by_file.setdefault(file, set()).add(name.split("[")[0])
    for file, names in by_file.items():
        remove_functions(repo_dir / file, names)
    setup_patch = git(repo_dir, "diff", "--binary")
    gold = git(repo_dir, "diff", "-R", "--", module)
    test_patch = git(repo_dir, "diff", "-R", "--", *by_file)
    return Task(
        instance_id=f"{repo}__stub__{function}-{base[:8]}", repo=repo, source=str(original), base_commit=base,
        version="0", created_at="2026-11-30T00:00:00Z", strategy="stub", entities=(f"{module}:{function}",),
        setup_patch=setup_patch, patch=gold, test_patch=test_patch,
        problem_statement=f"Implement {function}.", fail_to_pass=f2p, pass_to_pass=p2p, env_spec=spec,
        difficulty=Difficulty(0, 1, 1, 1, 1, 0, 0, 1, len(f2p), 0.1),
    )


MINILIB = {
    "minilib/__init__.py": "from minilib.text import shout, whisper\n\n__all__ = ['shout', 'whisper']\n",
    "minilib/text.py": (
        'def shout(s):\n    """Upper-case ``s`` and add an exclamation mark."""\n    return s.upper() + "!"\n\n\n'
        'def whisper(s):\n    """Lower-case ``s`` and trail off."""\n    return s.lower() + "..."\n'
    ),
    "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef word():\n    return 'Hey'\n",
    "tests/test_shout.py": (
        "from minilib import shout\n\n\ndef test_shout(word):\n    assert shout(word) == 'HEY!'\n\n\n"
        "def test_shout_empty():\n    assert shout('') == '!'\n"
    ),
    "tests/test_whisper.py": (
        "from minilib import whisper\n\n\ndef test_whisper(word):\n    assert whisper(word) == 'hey...'\n\n\n"
        "def test_whisper_empty():\n    assert whisper('') == '...'\n"
    ),
    "pyproject.toml": '[project]\nname = "minilib"\nversion = "0.1"\n\n[tool.pytest.ini_options]\n'
                      'testpaths = ["tests"]\n',
}
MINILIB_SPEC = EnvSpec(project_name="minilib", python="3.11", install_target="", src_roots=(".",),
                       package_dirs=("minilib",), test_paths=("tests",))
INFLECTION_SPEC = EnvSpec(project_name="inflection", python="3.11", install_target="", src_roots=(".",),
                          package_dirs=("inflection",), test_paths=("test_inflection.py",))


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def fetch_inflection(dest: Path) -> Path:
    """The ``inflection==0.5.1`` sdist from PyPI, unpacked (needs a package index)."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-q",
                    "inflection==0.5.1", "-d", str(dest)], check=True, timeout=300, capture_output=True)
    subprocess.run(["tar", "xzf", "inflection-0.5.1.tar.gz"], cwd=dest, check=True, timeout=60)
    tree = dest / "inflection-0.5.1"
    subprocess.run(["rm", "-rf", str(tree / "docs" / "__pycache__"), str(tree / "inflection.egg-info")],
                   check=True, timeout=60)
    return tree


def broken_tree(task: Task, trees: object, dest: Path) -> Path:
    """The workspace an agent gets, as a git repository (so hacks can be written as `git diff`)."""
    from taskforge.core.patches import apply

    dest.mkdir(parents=True)
    trees.materialize(task, dest)  # type: ignore[attr-defined]
    apply(task.setup_patch, dest, what="setup_patch")
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "broken")
    return dest


def make_patch(task: Task, trees: object, work: Path, *, write: dict[str, str] | None = None,
               append: dict[str, str] | None = None, delete: tuple[str, ...] = (),
               links: dict[str, str] | None = None) -> str:
    """An agent patch (``git diff --binary`` against the broken workspace) doing the given edits."""
    ws = broken_tree(task, trees, work / f"agent-{len(list(work.iterdir()))}")
    for rel, text in (write or {}).items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    for rel, text in (append or {}).items():
        (ws / rel).write_text((ws / rel).read_text() + "\n" + text)
    for rel in delete:
        (ws / rel).unlink()
    for rel, target in (links or {}).items():
        if (ws / rel).exists():
            (ws / rel).unlink()
        (ws / rel).symlink_to(target)
    git(ws, "add", "-A")
    return git(ws, "diff", "--cached", "--binary")
