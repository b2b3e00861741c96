"""Write a file so that a reader (or a run killed half way) sees the old content or the new, never half.

    write_atomic(path, text_or_bytes)                 # caches, logs, state files
    write_atomic(path, data, durable=True)            # dataset files and journals: fsynced, survive power loss

The data goes to a temporary file of its own in the same folder (``<name>.<random>.tmp``: concurrent
writers never share one), which is renamed over ``path``; a failed write removes it. Files are 0644,
like any other file written by the process (``mkstemp`` alone would make them 0600).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path | str, data: bytes | str, *, durable: bool = False) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# What is never part of a repository's tree: VCS stores, tool caches, virtualenvs. The one list every
# copy, comparison, archive and walk of a tree uses, so a workspace, its archive and a grading agree.
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".nox",
    ".venv", "venv", ".eggs", ".hypothesis",
})
BYTECODE_SUFFIXES = (".pyc", ".pyo")


def copy_ignore(directory: str, names: list[str]) -> set[str]:
    """``shutil.copytree(ignore=...)``: leave out ``SKIP_DIRS`` and byte code."""
    return {n for n in names if n in SKIP_DIRS or n.endswith(BYTECODE_SUFFIXES)}
