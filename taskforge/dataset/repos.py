"""The dataset's copy of each original repository tree, and the workspaces rebuilt from it.

A dataset must be enough, on its own, to grade a patch: ``DIR/repos/`` holds one deterministic
``tar.gz`` of the original tree per ``(repo, base_commit)`` (VCS metadata and caches left out).
From it and a row's patches every other state is rebuilt:

    original  = extract_original(...)
    broken    = original + setup_patch     (what an agent sees: feature and hidden tests removed)
    solved    = broken + patch             (gold; test files untouched)
    graded    = broken + agent patch + test_patch

Patches are applied with ``git apply`` (argv list, timeout, process group killed on timeout), with
repository discovery fenced off so an enclosing checkout is never touched.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import tarfile
from pathlib import Path

from taskforge.core.errors import DatasetError
from taskforge.core.files import BYTECODE_SUFFIXES, SKIP_DIRS
from taskforge.core.patches import apply
from taskforge.core.task import Task
from taskforge.dataset.manifest import REPOS_DIR, FileEntry, commit_file

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def archive_name(repo: str, base_commit: str) -> str:
    return f"{_SAFE.sub('_', repo)}-{_SAFE.sub('_', base_commit)}.tar.gz"


def repo_archive_path(root: Path, task: Task) -> Path:
    """Where the original tree of ``task``'s ``(repo, base_commit)`` lives in dataset ``root``."""
    return Path(root) / REPOS_DIR / archive_name(task.repo, task.base_commit)


def _members(src: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        base = Path(dirpath)
        out.extend(base / d for d in dirnames)
        out.extend(base / f for f in sorted(filenames) if not f.endswith(BYTECODE_SUFFIXES))
    return sorted(out, key=lambda p: p.relative_to(src).as_posix())


def tar_directory(src: Path, dest: Path, select: set[str] | None = None) -> None:
    """Write a byte-reproducible ``tar.gz`` of ``src`` (sorted, mtime 0, owner root) to ``dest``.

    ``select``: only these workspace-relative files (their directories are implied).
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _members(src):
            rel = path.relative_to(src).as_posix()
            if select is not None and (path.is_dir() or rel not in select):
                continue
            info = tar.gettarinfo(str(path), arcname=rel)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if info.isfile():
                info.mode = 0o755 if info.mode & 0o111 else 0o644
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            elif info.isdir():
                info.mode = 0o755
                tar.addfile(info)
            elif info.issym():
                tar.addfile(info)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(buf.getvalue())
    commit_file(tmp, dest)


def write_repo_archive(root: Path, repo: str, base_commit: str, src_dir: Path) -> FileEntry:
    """Store the original tree ``src_dir`` of ``(repo, base_commit)``; kept as is when already stored."""
    src_dir = Path(src_dir)
    if not src_dir.is_dir():
        raise DatasetError(f"cannot archive repository {repo!r}: {src_dir} is not a directory")
    dest = Path(root) / REPOS_DIR / archive_name(repo, base_commit)
    if not dest.is_file():
        tar_directory(src_dir, dest)
    return FileEntry.of(Path(root), dest, repo=repo, base_commit=base_commit)


EXTRACTED_MTIME = 946684800  # 2000-01-01: archives store mtime 0, and zip (wheels) cannot hold times before 1980


def _extracted(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
    """The ``data`` filter, with a file time a wheel can hold: flit_core refuses to build idna from a tree of
    1970 mtimes (``ZIP does not support timestamps before 1980``), so no environment could be built from the
    dataset's own archive on a machine without the cached one."""
    return tarfile.data_filter(member, path).replace(mtime=EXTRACTED_MTIME, deep=False)


def extract_archive(archive: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(dest, filter=_extracted)
    return dest


def extract_original(root: Path, task: Task, dest: Path, entry: FileEntry | None = None) -> Path:
    """Extract the original tree of ``task`` into ``dest``; ``entry`` (from the manifest) is verified."""
    archive = repo_archive_path(root, task)
    if not archive.is_file():
        raise DatasetError(f"dataset {root} has no archive of {task.repo}@{task.base_commit[:12]} "
                           f"(expected {archive.relative_to(root)}); regenerate the dataset with archives")
    if entry is not None:
        entry.verify(Path(root))
    return extract_archive(archive, Path(dest))


def broken_workspace(root: Path, task: Task, dest: Path, entry: FileEntry | None = None) -> Path:
    """The workspace an agent gets: the original tree with ``setup_patch`` applied."""
    extract_original(root, task, dest, entry)
    apply(task.setup_patch, dest, what=f"setup_patch of {task.instance_id}")
    return dest
