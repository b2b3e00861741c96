"""Scrub a task's workspace before the agent gets it: nothing derived from the original code stays.

What goes (each listed in the ``ScrubReport``):

- git: the workspace's ``.git`` is replaced by a fresh repository holding the broken workspace as one
  commit (fixed author and date, so the same workspace gives the same sha): no remotes, tags, reflog,
  stash, packs or unreachable objects of the original. ``git_mode="none"`` leaves no ``.git`` at all.
  The original repository is never touched: the workspace is a copy.
- byte code and caches: ``__pycache__``, ``*.pyc``, ``.mypy_cache``, ``.pytype``, ``.pyre``,
  ``.ruff_cache``, ``.pytest_cache``, ``.hypothesis``, ``.coverage*``, pyright/jedi caches, ``htmlcov``.
- build artefacts: ``*.egg-info``, ``.eggs``, top-level ``build/``, ``dist/``, ``.tox``, ``.nox``,
  ``.cache`` (pip/uv caches), built docs (Sphinx ``_build``, MkDocs ``site/``), and compiled extensions
  (``*.so``/``*.pyd``) of a module that held deleted code.
- stubs: a ``.pyi`` (also in ``*-stubs`` packages) declaring a deleted entity loses that declaration
  (libcst, like the source); a stub of a deleted module is removed.

The environment never holds the project: the sandbox strips its installed copy when it builds the
environment (``sandboxes.local.strip_project_code``; docker images get its metadata only), and the audit
searches the environment for what is left.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
import libcst as cst

CACHE_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytype", ".pyre", ".ruff_cache", ".pytest_cache",
                        ".hypothesis", ".pyright", ".jedi", "htmlcov", ".dmypy"})
TYPECHECKER_CACHES = frozenset({".mypy_cache", ".pytype", ".pyre", ".pyright", ".jedi", ".dmypy"})
CACHE_FILE_SUFFIXES = (".pyc", ".pyo")
CACHE_FILE_NAMES = frozenset({".dmypy.json", "coverage.xml", "coverage.json"})
TOP_LEVEL_ARTEFACTS = frozenset({"build", "dist", ".tox", ".nox", ".eggs", ".cache", "pip-wheel-metadata"})
EXTENSION_SUFFIXES = (".so", ".pyd")
GIT_TIMEOUT_S = 300
_AUTHOR = "taskforge <taskforge@localhost>"
_DATE = "2000-01-01T00:00:00+0000"


@dataclass(frozen=True, slots=True)
class ScrubReport:
    removed: tuple[str, ...] = ()  # workspace-relative paths removed (directories as one entry)
    edited: tuple[str, ...] = ()  # stubs whose declarations of deleted entities were removed
    git: str = ""  # "fresh <sha>" | "removed" | "none" (no .git before or after)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"removed": list(self.removed), "edited": list(self.edited), "git": self.git,
                "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScrubReport:
        return cls(tuple(d.get("removed", ())), tuple(d.get("edited", ())), d.get("git", ""),
                   float(d.get("seconds", 0.0)))


def is_artefact_dir(path: Path, root: Path) -> bool:
    """A directory the scrub removes (cache, build output, built docs, egg-info)."""
    name = path.name
    if name in CACHE_DIRS or name.endswith(".egg-info") or name == "_build":
        return True
    if path.parent == root:
        return name in TOP_LEVEL_ARTEFACTS or (name == "site" and _is_built_site(path))
    return False


def _is_built_site(path: Path) -> bool:
    return (path / "index.html").is_file() and ((path / "sitemap.xml").is_file() or (path / "search").is_dir())


def _is_artefact_file(path: Path, root: Path, modules: set[str]) -> bool:
    name = path.name
    if name.endswith(CACHE_FILE_SUFFIXES) or name in CACHE_FILE_NAMES or name.startswith(".coverage"):
        return True
    if name.endswith(EXTENSION_SUFFIXES):
        rel = path.relative_to(root).with_name(name.split(".", 1)[0]).with_suffix("")
        return bool(_dotted_suffixes(rel.parts) & modules)
    return False


def scrub_workspace(workspace: Path | str, deleted: Iterable[str], *, git_mode: str = "fresh",
                    message: str = "Task workspace") -> ScrubReport:
    """Remove from ``workspace`` everything derived from the original code; see the module docstring.

    ``deleted``: qualified names of the deleted entities. ``git_mode``: "fresh" (one new commit) or
    "none" (no ``.git``). ``workspace`` must be the task's copy, never the original checkout.
    """
    if git_mode not in ("fresh", "none"):
        raise ValueError(f"git_mode must be 'fresh' or 'none', got {git_mode!r}")
    start = time.perf_counter()
    root = Path(workspace)
    entities = tuple(deleted)
    modules = {q.rsplit(".", i)[0] for q in entities for i in range(q.count(".") + 1)}
    removed: list[str] = []
    for path in _artefacts(root, modules):
        removed.append(path.relative_to(root).as_posix())
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    edited = []
    for stub in sorted(root.rglob("*.pyi")):
        if ".git" in stub.relative_to(root).parts:
            continue
        outcome = scrub_stub(stub, root, entities)
        if outcome == "removed":
            removed.append(stub.relative_to(root).as_posix())
        elif outcome == "edited":
            edited.append(stub.relative_to(root).as_posix())
    git_state = _reset_git(root, git_mode, message)
    return ScrubReport(tuple(removed), tuple(edited), git_state, time.perf_counter() - start)


def _artefacts(root: Path, modules: set[str]) -> list[Path]:
    found: list[Path] = []
    stack = [root]
    while stack:
        here = stack.pop()
        for child in sorted(here.iterdir()):
            if child.name == ".git":
                if here != root:  # a nested repository's store (its history): goes, its files stay
                    found.append(child)
                continue
            if child.is_dir() and not child.is_symlink():
                if is_artefact_dir(child, root):
                    found.append(child)
                else:
                    stack.append(child)
            elif _is_artefact_file(child, root, modules):
                found.append(child)
    return found


def _reset_git(root: Path, git_mode: str, message: str) -> str:
    dot = root / ".git"
    had = dot.exists() or dot.is_symlink()
    if dot.is_dir() and not dot.is_symlink():
        shutil.rmtree(dot)
    elif had:
        dot.unlink()
    if git_mode == "none":
        return "removed" if had else "none"
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cfg:
        cfg.set_value("core", "logAllRefUpdates", "false")
        cfg.set_value("commit", "gpgsign", "false")
        cfg.set_value("user", "name", "taskforge")
        cfg.set_value("user", "email", "taskforge@localhost")
    env = {"GIT_AUTHOR_DATE": _DATE, "GIT_COMMITTER_DATE": _DATE, "GIT_AUTHOR_NAME": "taskforge",
           "GIT_COMMITTER_NAME": "taskforge", "GIT_AUTHOR_EMAIL": "taskforge@localhost",
           "GIT_COMMITTER_EMAIL": "taskforge@localhost"}
    with repo.git.custom_environment(**env):
        repo.git.add("-A", kill_after_timeout=GIT_TIMEOUT_S)
        repo.git.commit("-q", "--no-verify", "--allow-empty", "-m", message, kill_after_timeout=GIT_TIMEOUT_S)
    shutil.rmtree(dot / "logs", ignore_errors=True)
    for sample in (dot / "hooks").glob("*.sample"):
        sample.unlink()
    return f"fresh {repo.head.commit.hexsha}"


# --- stubs ---------------------------------------------------------------------------------------

def _dotted_suffixes(parts: Sequence[str]) -> set[str]:
    names = [p[: -len("-stubs")] if p.endswith("-stubs") else p for p in parts]
    if names and names[-1] == "__init__":
        names = names[:-1]
    return {".".join(names[i:]) for i in range(len(names))}


def _stub_targets(stub: Path, root: Path, entities: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]:
    """``(qualname, path inside the stub)`` for each deleted entity the stub's module could declare."""
    modules = _dotted_suffixes(stub.relative_to(root).with_suffix("").parts)
    out = []
    for q in entities:
        parts = q.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in modules:
                out.append((q, tuple(parts[i:])))
                break
    return out


def stub_declarations(stub: Path, root: Path, entities: Iterable[str]) -> list[str]:
    """Deleted entities that ``stub`` (a ``.pyi`` under ``root``) still declares."""
    targets = _stub_targets(stub, root, entities)
    if not targets:
        return []
    try:
        module = cst.parse_module(stub.read_text(encoding="utf-8", errors="replace"))
    except cst.ParserSyntaxError:
        return []
    found = []
    for q, inner in targets:
        if not inner:
            found.append(q)
            continue
        finder = _Remover({inner})
        module.visit(finder)
        if finder.removed:
            found.append(q)
    return found


def scrub_stub(stub: Path, root: Path, entities: Iterable[str]) -> str:
    """Remove declarations of deleted entities from ``stub``: "removed" (deleted module), "edited", ""."""
    targets = _stub_targets(stub, root, entities)
    if not targets:
        return ""
    if any(not inner for _q, inner in targets):
        stub.unlink()
        return "removed"
    try:
        module = cst.parse_module(stub.read_text(encoding="utf-8", errors="replace"))
    except cst.ParserSyntaxError:
        return ""
    remover = _Remover({inner for _q, inner in targets})
    new = module.visit(remover)
    if not remover.removed:
        return ""
    stub.write_text(new.code, encoding="utf-8")
    return "edited"


_ELLIPSIS_BODY = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Expr(cst.Ellipsis())])])


class _Remover(cst.CSTTransformer):
    """Drops the definitions (``def``, ``class``, annotated names, overloads) at the given paths."""

    def __init__(self, targets: set[tuple[str, ...]]) -> None:
        super().__init__()
        self.targets = targets
        self.scope: list[str] = []
        self.removed: set[tuple[str, ...]] = set()

    def _hit(self, name: str) -> bool:
        path = (*self.scope, name)
        if path in self.targets:
            self.removed.add(path)
            return True
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.scope.append(node.name.value)
        return True

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> Any:
        self.scope.pop()
        if self._hit(original.name.value):
            return cst.RemoveFromParent()
        body = updated.body
        if isinstance(body, cst.IndentedBlock) and not body.body:
            return updated.with_changes(body=_ELLIPSIS_BODY)
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # nothing inside a function body is a declaration of the module

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
        return cst.RemoveFromParent() if self._hit(original.name.value) else updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> Any:
        names = [s.target.value for s in original.body
                 if isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name)]
        if names and len(names) == len(original.body) and all(self._hit(n) for n in names):
            return cst.RemoveFromParent()
        return updated

    def leave_If(self, original: cst.If, updated: cst.If) -> Any:
        body = updated.body
        if isinstance(body, cst.IndentedBlock) and not body.body:
            return updated.with_changes(body=_ELLIPSIS_BODY)
        return updated
