"""Unified diffs that ``git apply`` accepts, applying them, and the three patches of a task.

A *file map* is ``{workspace-relative path: text or None}`` (``None`` = the file is absent). ``diff``
turns two file maps into a git-style patch (``diff --git`` headers, ``new file mode``/``deleted file
mode`` for creations and deletions, ``\\ No newline at end of file`` markers) built by patience diff (``taskforge.core.linediff``);
``apply`` runs the real ``git apply`` on a directory, with a timeout.

The three patches of a task (``task_patches``), for an original workspace and its broken version:
- ``setup_patch``: original -> broken (the feature removed *and* the hidden tests removed);
- ``patch`` (gold): broken -> original on non-test files only;
- ``test_patch``: broken -> original on test files only (restores the hidden tests).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskforge.core.errors import PatchError
from taskforge.core.files import BYTECODE_SUFFIXES, SKIP_DIRS
from taskforge.core.linediff import unified
from taskforge.core.process import run_capture

FileMap = Mapping[str, str | None]

_BAD_PATH = re.compile(r'[\x00-\x1f"\\]')
_GIT_APPLY_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class TaskPatches:
    setup_patch: str  # original -> broken workspace (feature and hidden tests removed)
    patch: str  # gold: broken -> original, non-test files only
    test_patch: str  # broken -> original, test files only

    def to_dict(self) -> dict[str, Any]:
        return {"setup_patch": self.setup_patch, "patch": self.patch, "test_patch": self.test_patch}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TaskPatches:
        return cls(d["setup_patch"], d["patch"], d["test_patch"])


def _check_path(path: str) -> str:
    p = path.replace(os.sep, "/")
    if not p or p.startswith("/") or _BAD_PATH.search(p) or any(part in ("..", "") for part in p.split("/")):
        raise PatchError(f"path {path!r} cannot go into a patch (expected a plain workspace-relative path)")
    return p


def _lines(text: str) -> list[str]:
    """Lines as git sees them: split on newline only (``str.splitlines`` also splits on ``\\r``, ``\\x0c``...)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _hunk_lines(a: list[str], b: list[str]) -> list[str]:
    out: list[str] = []
    for line in list(unified(a, b, n=3))[2:]:  # drop the diff's own ---/+++ lines
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n")
            out.append("\\ No newline at end of file\n")
    return out


def diff_file(path: str, before: str | None, after: str | None) -> str:
    """The git-style diff of one file ('' when nothing changed)."""
    if before == after:
        return ""
    p = _check_path(path)
    head = [f"diff --git a/{p} b/{p}\n"]
    if before is None:
        head.append("new file mode 100644\n")
    elif after is None:
        head.append("deleted file mode 100644\n")
    a_lines, b_lines = _lines(before or ""), _lines(after or "")
    if not a_lines and not b_lines:  # an empty file created or deleted: header only
        return "".join(head)
    head.append(f"--- {'/dev/null' if before is None else 'a/' + p}\n")
    head.append(f"+++ {'/dev/null' if after is None else 'b/' + p}\n")
    return "".join(head + _hunk_lines(a_lines, b_lines))


def diff(before: FileMap, after: FileMap, paths: Iterable[str] | None = None) -> str:
    """A patch turning ``before`` into ``after`` (paths missing from a map count as absent)."""
    keys = sorted(set(paths) if paths is not None else set(before) | set(after))
    return "".join(diff_file(k, before.get(k), after.get(k)) for k in keys)


def read_tree(root: Path, paths: Iterable[str] | None = None) -> dict[str, str | None]:
    """File map of ``root`` (all files outside ``.git`` and byte code when ``paths`` is None)."""
    root = Path(root)
    if paths is None:  # byte code is never part of a workspace's text
        paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                       if p.is_file() and p.suffix not in BYTECODE_SUFFIXES
                       and not SKIP_DIRS & set(p.relative_to(root).parts))
    out: dict[str, str | None] = {}
    for rel in paths:
        f = root / rel
        if not f.is_file():
            out[rel] = None
            continue
        try:
            out[rel] = f.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise PatchError(f"{f} is not UTF-8 text; text patches cannot carry it") from None
    return out


def diff_trees(before_dir: Path, after_dir: Path, paths: Iterable[str] | None = None) -> str:
    """A patch turning directory ``before_dir`` into ``after_dir`` (``.git`` ignored)."""
    if paths is None:
        a, b = read_tree(before_dir), read_tree(after_dir)
    else:
        paths = list(paths)
        a, b = read_tree(before_dir, paths), read_tree(after_dir, paths)
    return diff(a, b)


def apply(patch: str, directory: Path, *, check: bool = False, reverse: bool = False, what: str = "patch",
          timeout_s: float = _GIT_APPLY_TIMEOUT_S) -> None:
    """Apply ``patch`` to ``directory`` with ``git apply``; raise ``PatchError`` when it does not apply.

    The one ``git apply`` of the project (workspaces, datasets, gradings). ``what`` names the patch in
    errors. git never sees an enclosing repository (``GIT_CEILING_DIRECTORIES``, no ``GIT_*`` of ours):
    paths would then be taken relative to that repository's root.
    """
    if not patch.strip():
        return
    directory = Path(directory).resolve()
    with tempfile.NamedTemporaryFile("w", suffix=".patch", delete=False, encoding="utf-8", newline="") as fh:
        fh.write(patch)
        patch_file = fh.name
    argv = ["git", "apply", "--whitespace=nowarn"]
    if check:
        argv.append("--check")
    if reverse:
        argv.append("--reverse")
    argv.append(patch_file)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CEILING_DIRECTORIES=str(directory.parent), LC_ALL="C")
    try:
        rc, out = run_capture(argv, timeout_s, cwd=directory, env=env, tail=4000)
    except FileNotFoundError:
        raise PatchError("git is not installed; install git to build workspaces and grade patches") from None
    finally:
        os.unlink(patch_file)
    if rc is None:
        raise PatchError(f"git apply of {what} in {directory} ran past {timeout_s:.0f}s and was killed; "
                         "the patch is too large or the disk is stuck")
    if rc != 0:
        first = out.strip().splitlines()[0] if out.strip() else f"exit code {rc}"
        raise PatchError(f"{what} does not apply to {directory} ({first}); expected a patch made against "
                         "this exact workspace")


def applies(patch: str, directory: Path) -> bool:
    try:
        apply(patch, directory, check=True)
    except PatchError:
        return False
    return True


def write_tree(files: FileMap, root: Path) -> None:
    """Write a file map into ``root`` (``None`` removes the file)."""
    for rel, text in files.items():
        target = Path(root) / _check_path(rel)
        if text is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))


# ---------------------------------------------------------------------------------------------------
# splitting
# ---------------------------------------------------------------------------------------------------
def split_files(patch: str) -> list[tuple[str, str]]:
    """``[(path, diff of that file)]`` in patch order (the path is the new one, or the old one if deleted)."""
    chunks = re.split(r"(?m)^(?=diff --git )", patch)
    out = []
    for chunk in chunks:
        if not chunk.startswith("diff --git "):
            if chunk.strip():
                raise PatchError("patch has text before its first 'diff --git' header; expected a git diff")
            continue
        out.append((_chunk_path(chunk), chunk))
    return out


def _chunk_path(chunk: str) -> str:
    new = re.search(r"(?m)^\+\+\+ (?:b/)?(.+?)\t?$", chunk)
    if new and new.group(1) != "/dev/null":
        return new.group(1)
    old = re.search(r"(?m)^--- (?:a/)?(.+?)\t?$", chunk)
    if old and old.group(1) != "/dev/null":
        return old.group(1)
    head = re.match(r"diff --git a/(.+) b/(.+)\n", chunk)
    if head is None:
        raise PatchError(f"cannot read the file name of a patch section: {chunk.splitlines()[0]!r}")
    return head.group(2)


def patch_paths(patch: str) -> list[str]:
    return [p for p, _ in split_files(patch)]


def split_patch(patch: str, is_test: Callable[[str], bool]) -> tuple[str, str]:
    """``(non-test part, test part)`` of a patch."""
    code: list[str] = []
    tests: list[str] = []
    for path, chunk in split_files(patch):
        (tests if is_test(path) else code).append(chunk)
    return "".join(code), "".join(tests)


def task_patches(original: FileMap, broken: FileMap, is_test: Callable[[str], bool]) -> TaskPatches:
    """The three patches of a task from the files the deletion and the test hiding touched."""
    keys = set(original) | set(broken)
    setup = diff(original, broken, keys)
    gold = diff(broken, original, [k for k in keys if not is_test(k)])
    tests = diff(broken, original, [k for k in keys if is_test(k)])
    return TaskPatches(setup_patch=setup, patch=gold, test_patch=tests)
