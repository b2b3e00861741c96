"""Assemble one grading workspace: original tree -> broken -> agent patch -> grader-owned files restored.

Order (the reward contract, ``DESIGN.md``):

1. the original tree (from the dataset archive or any ``OriginalTree`` provider), ``setup_patch`` applied;
2. the vetted agent patch (``taskforge.reward.patch_guard``) applied to non-test files only;
3. every test file and test-support file restored byte-for-byte from the original, and any such file
   the original does not have deleted (new ``conftest.py``, ``sitecustomize.py``, ``*.pth``, configs);
   a symlink the original does not have is tampering;
4. the pytest configuration pinned: a clean ini generated from the original's safe keys, passed with
   ``-c``, ``--rootdir`` and ``--confcutdir``, so no file of the workspace can add options or plugins.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import multiprocessing.util
import os
import shlex
import shutil
import tempfile
import threading
import tomllib
import weakref
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from _pytest.config.findpaths import load_config_dict_from_file

from taskforge.core.files import SKIP_DIRS, copy_ignore
from taskforge.core.pyparse import parse
from taskforge.core.task import Task
from taskforge.reward.patch_guard import ProtectedPaths, symlinks_in

CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")  # pytest's order
# ini keys that could narrow, widen or short-circuit a grading run; the rest of the original config is kept
_DROPPED_KEYS = frozenset({"addopts", "required_plugins", "testpaths", "cache_dir", "minversion",
                           "junit_family", "junit_suite_name", "log_file", "log_cli", "console_output_style"})


class OriginalTree(Protocol):
    """Provides the original repository tree of a task (the dataset's archive, or a directory)."""

    def materialize(self, task: Task, dest: Path) -> None:
        """Write the original tree of ``task`` into the empty directory ``dest``."""
        ...


class DatasetTrees:
    """Original trees from a dataset directory's ``repos/`` archives (``taskforge.dataset.repos``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def materialize(self, task: Task, dest: Path) -> None:
        from taskforge.dataset.repos import extract_original

        extract_original(self.root, task, dest)

    def cache_key(self, task: Task) -> tuple[str, ...]:
        """Names the tree ``materialize`` writes for ``task`` (``SharedOriginals``)."""
        return ("dataset", str(self.root.resolve()), task.instance_id, task.content_hash)


class DirectoryTrees:
    """Original trees copied from directories: one for every task, or one per ``task.repo``."""

    def __init__(self, source: Path | Mapping[str, Path]) -> None:
        self.source = source

    def _source(self, task: Task) -> Path:
        return Path(self.source[task.repo]) if isinstance(self.source, Mapping) else Path(self.source)

    def materialize(self, task: Task, dest: Path) -> None:
        shutil.copytree(self._source(task), dest, symlinks=True, dirs_exist_ok=True, ignore=copy_ignore)

    def cache_key(self, task: Task) -> tuple[str, ...]:
        """Names the tree ``materialize`` writes for ``task`` (``SharedOriginals``): the directory's."""
        return ("directory", str(self._source(task).resolve()))


class SharedOriginals:
    """Original trees materialized once per process and shared, read-only, by the gradings that need them.

    A grading used to copy its original twice: ``materialize`` into its own folder, then into its workspace
    (1-2 s a grading on docutils and jsonschema, where a candidate's battery grades up to 7 times). A provider
    with a ``cache_key(task)`` gets its trees kept here (the last ``size`` of them, none removed while a grading
    uses it; all removed at exit); any other provider materializes into a folder of the grading's own.
    Nothing may write into a shared tree: gradings copy it (``taskforge.reward.reward``).
    """

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._forget()
        ref = weakref.ref(self)
        # a forked worker starts empty: the trees it inherited are its parent's to use and remove (evicting one
        # would delete it under the parent), and a lock held by another thread at the fork would never open
        def in_child() -> None:
            obj = ref()
            if obj is not None:
                obj._forget()

        os.register_at_fork(after_in_child=in_child)

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[tuple[str, ...], list[Any]] = {}  # key -> [path, users], oldest first
        self._root: Path | None = None

    @contextlib.contextmanager
    def use(self, trees: OriginalTree, task: Task) -> Iterator[Path]:
        key_of = getattr(trees, "cache_key", None)
        if key_of is None:
            with tempfile.TemporaryDirectory(prefix="tf-orig-") as tmp:
                trees.materialize(task, Path(tmp))
                yield Path(tmp)
            return
        key = tuple(key_of(task))
        with self._lock:
            item = self._items.get(key)
            if item is None:
                if self._root is None:
                    self._root = Path(tempfile.mkdtemp(prefix="tf-originals-"))
                    atexit.register(shutil.rmtree, self._root, True)
                    # a pool's forked worker exits without atexit handlers, but runs multiprocessing's finalizers
                    multiprocessing.util.Finalize(self, shutil.rmtree, args=(self._root, True), exitpriority=1)
                path = Path(tempfile.mkdtemp(dir=self._root))
                try:
                    trees.materialize(task, path)
                except BaseException:
                    shutil.rmtree(path, ignore_errors=True)
                    raise
                item = self._items[key] = [path, 0]
            item[1] += 1
            self._evict()
        try:
            yield item[0]
        finally:
            with self._lock:
                item[1] -= 1
                self._evict()

    def _evict(self) -> None:
        """Drop the oldest unused trees beyond ``size`` (called with the lock held)."""
        for key in [k for k, (_, users) in self._items.items() if not users][:max(0, len(self._items) - self._size)]:
            path, _ = self._items.pop(key)
            shutil.rmtree(path, ignore_errors=True)


def walk_files(root: Path) -> dict[str, Path]:
    """Workspace-relative path -> path of every file and symlink under ``root`` (caches skipped)."""
    out: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            if name in filenames or full.is_symlink():
                out[full.relative_to(root).as_posix()] = full
    return out


def plugin_modules(original: Path, src_roots: Iterable[str]) -> set[str]:
    """Files of pytest plugin modules named by the original's conftests (``pytest_plugins``) or config."""
    names: set[str] = set()
    for rel, path in walk_files(original).items():
        if Path(rel).name != "conftest.py" or path.is_symlink():
            continue
        try:
            tree = parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytest_plugins" for t in node.targets):
                for c in ast.walk(node.value):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        names.add(c.value)
    ini = original_ini(original)
    tokens = _addopts(ini)
    names.update(tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t == "-p")
    files: set[str] = set()
    for name in names:
        parts = name.split(".")
        for root in (*src_roots, "."):
            base = Path(root) / Path(*parts)
            for cand in (base.with_suffix(".py"), base / "__init__.py"):
                if (original / cand).is_file():
                    files.add(cand.as_posix().removeprefix("./"))
    return files


def original_ini(root: Path) -> dict[str, object]:
    """The pytest ini options of the (restored, original) config at the workspace root, pytest's order."""
    for name in CONFIG_FILES:
        path = root / name
        if path.is_file() and not path.is_symlink():
            found: Mapping[str, object] | None
            try:
                found = load_config_dict_from_file(path)
            except Exception:  # a malformed original config: grade with pytest's defaults
                found = None
            if found is None and name == "pyproject.toml":
                found = _native_table(path)
            if found is not None:
                return dict(found)
    return {}


def _native_table(path: Path) -> dict[str, object] | None:
    """pytest 9's ``[tool.pytest]`` table (native TOML types), which this process's pytest may not read;
    humanize 4.17.0 sets its ``--doctest-modules`` there, and without it its doctests were never graded."""
    try:
        tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("pytest", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if not isinstance(tool, dict) or "ini_options" in tool:
        return None
    table = {k: v for k, v in tool.items() if not isinstance(v, dict)}
    return table or None


def _addopts(ini: Mapping[str, object]) -> list[str]:
    raw = ini.get("addopts", "")
    try:
        return list(raw) if isinstance(raw, list) else shlex.split(str(raw))
    except ValueError:
        return []


def pinned_options(ini: Mapping[str, object]) -> list[str]:
    """The original addopts tokens grading keeps (``-p X``, ``--import-mode=...``, ``-W ...``)."""
    tokens = _addopts(ini)
    kept: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("-p", "-W", "--import-mode", "--doctest-glob") and i + 1 < len(tokens):
            if tokens[i + 1] != "no:cacheprovider":
                kept += [tok, tokens[i + 1]]
            i += 2
            continue
        if (tok.startswith(("-p", "-W")) and not tok.startswith("--") and len(tok) > 2) \
                or tok.startswith(("--import-mode=", "--doctest-glob=")) \
                or tok in ("--strict-markers", "--strict-config", "--strict", "--doctest-modules"):
            # --doctest-modules: a doctest node id of PASS_TO_PASS (zipp's) is collected only with it
            kept.append(tok)
        i += 1
    return kept


def write_clean_ini(ini: Mapping[str, object], dest: Path) -> None:
    """A ``[pytest]`` ini holding the original's options minus those that change what runs."""
    lines = ["[pytest]"]
    for key in sorted(ini):
        if key in _DROPPED_KEYS:
            continue
        value = ini[key]
        items = [str(v) for v in value] if isinstance(value, list) else str(value).splitlines() or [""]
        if len(items) > 1:  # an ini value of several lines arrives as one string, comments and blank lines kept
            # (zipp's filterwarnings): every line is re-indented, else `ignore:...` at column 0 is a new key
            items = [ln.strip() for ln in items if ln.strip() and not ln.strip().startswith(("#", ";"))]
        text = "\n    ".join(items)
        lines.append(f"{key} =" + (f" {text}" if len(items) == 1 and text else ("\n    " + text if text else "")))
    lines.append("addopts =")
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")


def restore_protected(workspace: Path, original: Path, protected: ProtectedPaths) -> tuple[list[str], list[str]]:
    """Overwrite grader-owned files from the original; delete new ones. Returns (restored, removed)."""
    orig_files = walk_files(original)
    restored: list[str] = []
    removed: list[str] = []
    for rel, src in orig_files.items():
        if protected.kind(rel) is None:
            continue
        dst = workspace / rel
        if dst.is_symlink() or (dst.exists() and not dst.is_file()):
            _remove(dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            continue  # symlinked tests in the original: left as the original tree has them
        if not dst.is_file() or dst.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dst)
            restored.append(rel)
    for rel, path in walk_files(workspace).items():
        if rel not in orig_files and protected.kind(rel) is not None:
            _remove(path)
            removed.append(rel)
    return restored, removed


def stray_symlinks(workspace: Path, original: Path) -> list[str]:
    """Symlinks in the workspace that the original tree does not have."""
    return symlinks_in(workspace, symlinks_in(original))


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
