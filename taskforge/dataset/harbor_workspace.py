"""The grading workspace of an exported Harbor task, built from the agent's files. Standalone: stdlib only.

Copied next to the verifier (``tests/harbor_workspace.py``); it never imports taskforge: what the grader
owns comes from the reward path's own ``taskforge/reward/protected.py``, shipped as ``harbor_protected.py``. The agent's
workspace reaches the separate verifier container as plain files (Harbor's ``/app`` artifact), never as
running code, and is treated as data. ``sanitize`` applies the reward path's rules to it, in place
(``taskforge.reward.patch_guard`` for a patch, ``taskforge.reward.workspace`` for the assembly):

- the agent's change is every file whose bytes (or symlink target) differ from the broken workspace,
  every new file and every deleted one; version-control and cache directories (``skip_dirs``) and byte
  code are not part of it;
- **refused** (score 0): a new or retargeted symlink, binary data (a NUL byte) in a changed file, a new
  top-level module that would shadow the standard library or the test tooling;
- **dropped**: changes to test and test-support files (``kind``); a start-up hook among them
  (``sitecustomize.py``, ``usercustomize.py``, ``*.pth``) is tampering (score 0);
- every test and test-support file is then restored byte-for-byte from the original, the ones the
  original does not have are deleted, and a symlink the original does not have is refused.

``copy_for_run`` copies the result to the directory the test run uses (no caches, no byte code), owned
by the grading user except the files the run may not change (``read_only_paths``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

if __package__:  # imported from the repository (taskforge.dataset)
    from ..reward.protected import STARTUP_HOOKS, ProtectedPaths
else:  # the task's tests/harbor_workspace.py: the shipped copy of taskforge/reward/protected.py is its sibling
    from harbor_protected import STARTUP_HOOKS, ProtectedPaths  # type: ignore[no-redef]

Protected = ProtectedPaths  # what the grader owns, from ``config.json``: ``Protected.from_config(cfg)``


@dataclass
class Assembly:
    """What ``sanitize`` did; ``refused`` non-empty means: score 0, do not run."""

    refused: str = ""
    changed: list = field(default_factory=list)  # source files the agent changed, added or deleted
    dropped: list = field(default_factory=list)  # protected files the agent changed (undone)
    startup_hooks: list = field(default_factory=list)
    restored: list = field(default_factory=list)
    removed: list = field(default_factory=list)


def walk(root: Path, skip_dirs: frozenset, skip_suffixes: tuple) -> dict[str, Path]:
    """Workspace-relative path -> path of every regular file and symlink (skipped dirs, byte code left out)."""
    out: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        keep = []
        for d in dirnames:
            full = Path(dirpath, d)
            if full.is_symlink():
                out[full.relative_to(root).as_posix()] = full
            elif d not in skip_dirs:
                keep.append(d)
        dirnames[:] = keep
        for name in filenames:
            full = Path(dirpath, name)
            if name.endswith(skip_suffixes) and not full.is_symlink():
                continue
            if full.is_symlink() or full.is_file():
                out[full.relative_to(root).as_posix()] = full
    return out


def _same(a: Path | None, b: Path | None) -> bool:
    if a is None or b is None:
        return a is b
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def _binary(path: Path) -> bool:
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                return False
            if b"\0" in chunk:
                return True


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif os.path.lexists(path):  # a fifo, socket or device node
        os.unlink(path)


def _safe_parent(workspace: Path, rel: str) -> Path:
    """The directory ``rel`` goes in, with every symlink or file standing in its way removed."""
    current = workspace
    for part in PurePosixPath(rel).parts[:-1]:
        current = current / part
        if current.is_symlink() or (os.path.lexists(current) and not current.is_dir()):
            _remove(current)
        current.mkdir(exist_ok=True)
    return current


def sanitize(workspace: Path, broken: Path, originals: Path, protected: Protected, skip_dirs: frozenset,
             skip_suffixes: tuple, original_symlinks: frozenset) -> Assembly:
    """Make ``workspace`` (the agent's files) the grading workspace, in place. See the module docstring.

    ``broken``: the broken workspace as the agent got it; ``originals``: the original tree's test and
    test-support files (every original file whose ``kind`` is not None).
    """
    out = Assembly()
    mine, base = walk(workspace, skip_dirs, skip_suffixes), walk(broken, skip_dirs, skip_suffixes)
    for rel in sorted(set(mine) | set(base)):
        now, before = mine.get(rel), base.get(rel)
        if _same(now, before):
            continue
        if protected.kind(rel) is not None:
            out.dropped.append(rel)
            name = PurePosixPath(rel).name
            if now is not None and (name in STARTUP_HOOKS or name.endswith(".pth")):
                out.startup_hooks.append(rel)
            continue
        if now is not None and now.is_symlink():
            out.refused = f"the workspace has a symlink {rel!r} the broken workspace does not have"
        elif now is not None and _binary(now):
            out.refused = f"{rel!r} carries binary data"
        elif protected.shadows(rel) and now is not None:
            out.refused = f"{rel!r} would shadow a standard-library or test-tool module on the import path"
        if out.refused:
            return out
        out.changed.append(rel)
    wanted = walk(originals, frozenset(), ())
    for rel, src in sorted(wanted.items()):
        dst = _safe_parent(workspace, rel) / PurePosixPath(rel).name
        if dst.is_symlink() or (os.path.lexists(dst) and not dst.is_file()):
            _remove(dst)
        if src.is_symlink():
            continue
        if not dst.is_file() or not _same(dst, src):
            shutil.copyfile(src, dst)
            out.restored.append(rel)
    for rel, path in sorted(walk(workspace, skip_dirs, skip_suffixes).items()):
        if rel not in wanted and protected.kind(rel) is not None:
            _remove(path)
            out.removed.append(rel)
    stray = sorted(rel for rel, p in walk(workspace, skip_dirs, skip_suffixes).items()
                   if p.is_symlink() and rel not in original_symlinks)
    if stray:
        out.refused = f"symlinks appeared in the workspace: {stray[:3]}"
    return out


def read_only_paths(workspace: Path, protected: Protected, skip_dirs: frozenset,
                    skip_suffixes: tuple) -> list[str]:
    """What the graded run may not change: the test directories whole, and every other grader-owned file."""
    dirs = [d.strip("/") for d in protected.test_dirs if d.strip("/") not in ("", ".")
            and (workspace / d.strip("/")).is_dir() and not (workspace / d.strip("/")).is_symlink()]
    out = list(dirs)
    for rel in walk(workspace, skip_dirs, skip_suffixes):
        if protected.kind(rel) is not None and not any(rel.startswith(d + "/") for d in dirs):
            out.append(rel)
    return sorted(out)


def copy_for_run(src: Path, dest: Path, skip_dirs: frozenset, skip_suffixes: tuple) -> None:
    """Copy the sanitized workspace: directories, regular files (0644/0755) and the original's symlinks."""
    dest.mkdir(mode=0o755)
    for rel, path in sorted(walk(src, skip_dirs, skip_suffixes).items()):
        target = _safe_parent(dest, rel) / PurePosixPath(rel).name
        if path.is_symlink():
            os.symlink(os.readlink(path), target)
        else:
            shutil.copyfile(path, target)
            os.chmod(target, 0o755 if os.stat(path).st_mode & 0o111 else 0o644)
    for dirpath, dirnames, _ in os.walk(src):  # empty directories the project may rely on
        dirnames[:] = [d for d in dirnames if d not in skip_dirs and not Path(dirpath, d).is_symlink()]
        for d in dirnames:
            (dest / Path(dirpath, d).relative_to(src)).mkdir(mode=0o755, parents=True, exist_ok=True)


def hand_over(root: Path, uid: int, gid: int, read_only: list[str]) -> None:
    """Give ``root`` to the grading user, except ``read_only`` paths: root's (files 0644, directories 0755),
    and every directory above one of them root's with the sticky bit (1777), as the docker sandbox does:
    the run can add files there but can neither change, replace, rename nor delete a read-only one."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.lchown(Path(dirpath, name), uid, gid)
    os.chown(root, uid, gid)
    parents = {root}
    for rel in read_only:
        top = root / rel
        parents.update(p for p in top.parents if p == root or root in p.parents)
        paths = [top] if not top.is_dir() or top.is_symlink() else [top, *top.rglob("*")]
        for p in paths:
            os.lchown(p, 0, 0)
            if not p.is_symlink():
                os.chmod(p, 0o755 if p.is_dir() or os.stat(p).st_mode & 0o111 else 0o644)
    frozen = {root / rel for rel in read_only}
    for d in parents - frozen:
        if not any(f in d.parents for f in frozen):
            os.chown(d, 0, 0)
            os.chmod(d, 0o1777)


def agent_diff(workspace: Path, broken: Path, skip_dirs: frozenset, skip_suffixes: tuple) -> str:
    """The agent's change as a git-style unified diff (what the reward path's patch monitor scans)."""
    import difflib

    mine, base = walk(workspace, skip_dirs, skip_suffixes), walk(broken, skip_dirs, skip_suffixes)
    out = []
    for rel in sorted(set(mine) | set(base)):
        now, before = mine.get(rel), base.get(rel)
        if _same(now, before):
            continue
        head = [f"diff --git a/{rel} b/{rel}\n"]
        if now is not None and now.is_symlink():
            head.append("new file mode 120000\n" if before is None else "new mode 120000\n")
        elif before is None:
            head.append("new file mode 100644\n")
        elif now is None:
            head.append("deleted file mode 100644\n")
        if any(p is not None and not p.is_symlink() and _binary(p) for p in (now, before)):
            out += [*head, f"Binary files a/{rel} and b/{rel} differ\n"]
            continue
        old_lines, new_lines = (_lines(p) for p in (before, now))
        body = list(difflib.unified_diff(old_lines, new_lines, f"a/{rel}" if before else "/dev/null",
                                         f"b/{rel}" if now else "/dev/null"))
        out += [*head, *(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in body)]
    return "".join(out)


def _lines(path: Path | None) -> list[str]:
    if path is None:
        return []
    if path.is_symlink():
        return [os.readlink(path)]
    return path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
