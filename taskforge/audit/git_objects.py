"""Read everything a workspace's git store holds, for the leak audit.

``iter_git_objects`` streams every object of every object store under ``.git`` (the repository's and
its submodules'), reachable or not, loose or packed, through ``git cat-file --batch-all-objects
--batch``, plus every other file of ``.git`` that can hold content (rebase/am patches, rerere
preimages, ``COMMIT_EDITMSG``...). ``pointer_hits`` finds what makes another store reachable: a ``.git``
file (``gitdir:``), ``objects/info/alternates``, remotes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import git

GIT_TIMEOUT_S = 600.0
_SKIP_IN_GITDIR = {"objects"}


def git_dirs(workspace: Path) -> list[Path]:
    """Every git directory in the workspace: its own, its submodules' (``.git/modules``), nested ones."""
    found: list[Path] = []
    top = workspace / ".git"
    if top.is_dir():
        found.append(top)
        modules = top / "modules"
        if modules.is_dir():
            found.extend(p.parent for p in modules.rglob("HEAD") if (p.parent / "objects").is_dir())
    for dirpath, dirnames, _files in os.walk(workspace):
        here = Path(dirpath)
        if here != workspace and ".git" in dirnames and (here / ".git" / "objects").is_dir():
            found.append(here / ".git")
        dirnames[:] = [d for d in dirnames if d != ".git"]
    return found


def pointer_hits(workspace: Path) -> Iterator[tuple[str, str]]:
    """``(path, evidence)`` for each way the workspace's git reaches an object store outside it."""
    dot = workspace / ".git"
    if dot.is_file():
        yield ".git", f".git is a pointer to another git directory: {dot.read_text(errors='replace').strip()!r}"
        return
    for gd in git_dirs(workspace):
        rel = gd.relative_to(workspace).as_posix()
        alternates = gd / "objects" / "info" / "alternates"
        if alternates.is_file() and alternates.read_text(errors="replace").strip():
            yield f"{rel}/objects/info/alternates", "borrows objects from another store: " + \
                alternates.read_text(errors="replace").strip().replace("\n", ", ")
        try:
            repo = git.Repo(gd)
            remotes = [(r.name, list(r.urls)) for r in repo.remotes]
        except (git.GitError, ValueError, OSError):
            continue
        for name, urls in remotes:
            yield f"{rel}/config", f"remote {name!r} -> {', '.join(urls)} (fetching it restores the original)"


def iter_git_objects(workspace: Path, timeout_s: float = GIT_TIMEOUT_S) -> Iterator[tuple[str, str, bytes]]:
    """``(label, kind, content)`` for every object and content file of every git dir under ``workspace``.

    label: ``"blob <sha>"`` (the workspace's store), ``"<nested>/.git:blob <sha>"``, or a file's path.
    """
    for gd in git_dirs(workspace):
        rel = gd.relative_to(workspace).as_posix()
        for sha, kind, data in _cat_all(gd, timeout_s):
            yield (f"{kind} {sha}" if rel == ".git" else f"{rel}:{kind} {sha}"), kind, data
        for dirpath, dirnames, filenames in os.walk(gd):
            if Path(dirpath) == gd:
                dirnames[:] = [d for d in dirnames if d not in _SKIP_IN_GITDIR and d != "modules"]
            for name in filenames:
                path = Path(dirpath) / name
                if path.is_file() and not path.is_symlink():
                    try:
                        yield path.relative_to(workspace).as_posix(), "file", path.read_bytes()
                    except OSError:
                        continue


class GitStoreUnreadable(Exception):
    """``git cat-file`` failed or timed out; the audit turns it into a hit (an unprovable store)."""


def _cat_all(gitdir: Path, timeout_s: float) -> Iterator[tuple[str, str, bytes]]:
    argv = ["git", f"--git-dir={gitdir}", "cat-file", "--batch-all-objects", "--batch", "--unordered"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout_s, kill)
    timer.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout
        while header := out.readline():
            parts = header.split()
            if len(parts) != 3 or parts[1] == b"missing":
                continue
            size = int(parts[2])
            data = out.read(size)
            out.read(1)  # the newline after each object
            yield parts[0].decode(), parts[1].decode(), data
        proc.wait()
        stderr = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    finally:
        timer.cancel()
        if proc.poll() is None:
            kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    if timed_out.is_set():
        raise GitStoreUnreadable(f"git cat-file on {gitdir} ran past {timeout_s:.0f}s and was killed")
    if proc.returncode != 0:
        raise GitStoreUnreadable(f"git cat-file on {gitdir} exited {proc.returncode}: {stderr[:200]}")
