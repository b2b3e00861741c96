"""Resolve a SOURCE into a git repository pinned at one commit, in the content-addressed work area.

    local git repository   cloned (``--rev`` picks a branch/tag/sha; default HEAD)
    plain directory        copied and committed as one commit
    git URL                cloned with gitpython, pinned to the resolved commit
    pypi:NAME==VERSION     sdist fetched with ``pip download --no-binary :all: --no-deps``, unpacked
                           safely and committed as one commit

Every snapshot lives in ``Settings.work_dir/repos/<name>-<commit[:12]>/``; the original source is never
modified. One-commit repositories are committed with a fixed author, committer and date, so the same
input always gives the same commit sha and later runs find and reuse the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import git

from taskforge.core.environment import normalise_name
from taskforge.core.errors import SourceError
from taskforge.core.files import write_atomic
from taskforge.core.process import run_capture

_FIXED_DATE = "2000-01-01T00:00:00+00:00"
_AUTHOR = ("taskforge", "taskforge@localhost")
_IGNORED_COPY = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".tox", ".nox", ".venv",
                                       ".pytest_cache", ".mypy_cache", ".ruff_cache")
_PYPI_RE = re.compile(r"^pypi:([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
_URL_RE = re.compile(r"^(https?|git|ssh|file)://|^[\w.-]+@[\w.-]+:")
DOWNLOAD_TIMEOUT_S = 600.0
CLONE_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class RepoSnapshot:
    """A repository checked out at one commit inside the work area."""

    source: str  # as given by the user
    name: str  # normalised project name (PyPI name, or the directory/repository name)
    version: str  # PyPI version, else the short commit sha
    path: str  # absolute path of the checkout in the work area
    commit: str  # full sha of the pinned commit
    created_at: str  # ISO-8601 date of the commit (sdists: newest file in the archive)

    @property
    def slug(self) -> str:
        """File-system friendly identity: ``name-version``."""
        return f"{self.name}-{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "name": self.name, "version": self.version, "path": self.path,
                "commit": self.commit, "created_at": self.created_at}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RepoSnapshot:
        return cls(d["source"], d["name"], d["version"], d["path"], d["commit"], d["created_at"])


def resolve_source(source: str, work_dir: Path, rev: str | None = None) -> RepoSnapshot:
    """Turn ``source`` into a pinned checkout under ``work_dir/repos``. Raises ``SourceError``."""
    repos = Path(work_dir) / "repos"
    repos.mkdir(parents=True, exist_ok=True)
    if m := _PYPI_RE.match(source.strip()):
        if rev:
            raise SourceError(f"--rev {rev!r} makes no sense for {source!r}: a PyPI sdist has one version")
        return _from_pypi(source, m.group(1), m.group(2), Path(work_dir))
    if source.startswith("pypi:"):
        raise SourceError(f"cannot parse {source!r}: expected pypi:NAME==VERSION, e.g. pypi:inflection==0.5.1")
    if _URL_RE.match(source):
        return _from_git_url(source, rev, repos)
    path = Path(source).expanduser()
    if not path.exists():
        raise SourceError(f"source {source!r} does not exist (tried it as a local path; "
                          "expected a directory, a git URL or pypi:NAME==VERSION)")
    if not path.is_dir():
        raise SourceError(f"source {source!r} is a file; expected a directory, a git URL or pypi:NAME==VERSION")
    if (path / ".git").exists():
        return _from_local_git(source, path.resolve(), rev, repos)
    if rev:
        raise SourceError(f"--rev {rev!r} given but {source!r} is a plain directory, not a git repository")
    return _from_directory(source, path.resolve(), repos)


# --- kinds of sources ------------------------------------------------------------------------------

def _from_local_git(source: str, path: Path, rev: str | None, repos: Path) -> RepoSnapshot:
    try:
        origin = git.Repo(path)
        commit = origin.commit(rev or "HEAD")
    except (git.GitError, git.BadName, git.BadObject, ValueError) as exc:
        what = f"revision {rev!r}" if rev else "HEAD"
        raise SourceError(f"cannot resolve {what} in git repository {source!r} ({_first_line(exc)})") from exc
    name = normalise_name(path.name)
    target = repos / f"{name}-{commit.hexsha[:12]}"
    if not _is_checkout(target, commit.hexsha):
        _clone_into(str(path), target, commit.hexsha, source)
    return _snapshot(source, name, commit.hexsha[:12], target)


def _from_git_url(source: str, rev: str | None, repos: Path) -> RepoSnapshot:
    name = normalise_name(re.sub(r"\.git$", "", source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]))
    tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=repos))
    try:
        try:
            repo = git.Repo.clone_from(source, tmp / "r", env=_git_env(), kill_after_timeout=CLONE_TIMEOUT_S)
            sha = repo.commit(rev or "HEAD").hexsha
        except (git.GitError, git.BadName, git.BadObject, ValueError) as exc:
            raise SourceError(f"cannot clone {source!r}{f' at {rev!r}' if rev else ''} with git "
                              f"({_first_line(exc)}); check the URL and the revision") from exc
        target = repos / f"{name}-{sha[:12]}"
        if not _is_checkout(target, sha):
            repo.git.checkout("--detach", "--force", sha)
            repo.close()
            _replace_dir(tmp / "r", target)
        return _snapshot(source, name, sha[:12], target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _from_directory(source: str, path: Path, repos: Path) -> RepoSnapshot:
    name = normalise_name(path.name)
    tmp = Path(tempfile.mkdtemp(prefix=".dir-", dir=repos))
    try:
        shutil.copytree(path, tmp / "r", ignore=_IGNORED_COPY, symlinks=True)
        sha = _commit_all(tmp / "r", f"taskforge snapshot of directory {path.name}", _FIXED_DATE)
        target = repos / f"{name}-{sha[:12]}"
        if not _is_checkout(target, sha):
            _replace_dir(tmp / "r", target)
        return _snapshot(source, name, sha[:12], target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _from_pypi(source: str, raw_name: str, version: str, work_dir: Path) -> RepoSnapshot:
    name = normalise_name(raw_name)
    alias = work_dir / "repos" / "by-source" / (hashlib.sha256(f"pypi:{name}=={version}".encode()).hexdigest()[:16]
                                                + ".json")
    if alias.is_file():
        try:
            snap = RepoSnapshot.from_dict(json.loads(alias.read_text()))
            if _is_checkout(Path(snap.path), snap.commit):
                return snap
        except (ValueError, KeyError):
            pass
    sdist = _download_sdist(name, version, work_dir / "sdists" / f"{name}-{version}")
    repos = work_dir / "repos"
    tmp = Path(tempfile.mkdtemp(prefix=".sdist-", dir=repos))
    try:
        newest = _unpack(sdist, tmp / "r")
        created_at = datetime.fromtimestamp(newest, UTC).isoformat() if newest else _FIXED_DATE
        sha = _commit_all(tmp / "r", f"{name} {version} (sdist {sdist.name})", created_at)
        target = repos / f"{name}-{version}-{sha[:12]}"
        if not _is_checkout(target, sha):
            _replace_dir(tmp / "r", target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    snap = _snapshot(source, name, version, target)
    alias.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(alias, json.dumps(snap.to_dict(), indent=2))
    return snap


# --- helpers ---------------------------------------------------------------------------------------

def _download_sdist(name: str, version: str, dest: Path) -> Path:
    existing = _sdists_in(dest)
    if existing:
        return existing[0]
    dest.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
            "--disable-pip-version-check", "--no-input", "-d", str(dest), f"{name}=={version}"]
    rc, out = run_capture(argv, DOWNLOAD_TIMEOUT_S)
    found = _sdists_in(dest)
    if rc != 0 or not found:
        reason = "timed out" if rc is None else _pip_reason(out)
        raise SourceError(f"cannot fetch sdist of {name}=={version} from PyPI ({reason}); "
                          f"tried: pip download --no-binary :all: --no-deps {name}=={version}")
    return found[0]


def _sdists_in(d: Path) -> list[Path]:
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.name.endswith((".tar.gz", ".tgz", ".zip", ".tar.bz2")))


def _pip_reason(out: str) -> str:
    for line in reversed(out.splitlines()):
        if line.startswith("ERROR:"):
            return line[len("ERROR:"):].strip()
    return _first_line(out[-300:]) or "pip failed"


def _unpack(archive: Path, dest: Path) -> float:
    """Unpack safely (no absolute paths, no ``..``, no links out) and strip the single top folder.

    Returns the newest member mtime (a deterministic date for the commit).
    """
    staging = dest.with_name(dest.name + ".unpack")
    staging.mkdir(parents=True)
    newest = 0.0
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    _check_member(staging, info.filename, archive)
                    newest = max(newest, datetime(*info.date_time, tzinfo=UTC).timestamp())
                zf.extractall(staging)
        else:
            with tarfile.open(archive) as tf:
                members = tf.getmembers()
                for m in members:
                    _check_member(staging, m.name, archive)
                    newest = max(newest, float(m.mtime))
                try:
                    tf.extractall(staging, filter="data")
                except tarfile.FilterError as exc:
                    raise SourceError(f"refusing to unpack {archive.name}: unsafe member ({exc})") from exc
        tops = [p for p in staging.iterdir()]
        root = tops[0] if len(tops) == 1 and tops[0].is_dir() else staging
        shutil.move(str(root), str(dest))
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        raise SourceError(f"cannot unpack {archive} ({_first_line(exc)}); delete it and retry") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return newest


def _check_member(root: Path, name: str, archive: Path) -> None:
    target = (root / name).resolve()
    if os.path.isabs(name) or not target.is_relative_to(root.resolve()):
        raise SourceError(f"refusing to unpack {archive.name}: member {name!r} escapes the target folder")


def _commit_all(path: Path, message: str, date: str) -> str:
    """Make ``path`` a one-commit repository with fixed identity and dates; return the sha."""
    repo = git.Repo.init(path, initial_branch="main")
    try:
        repo.git.add("--all", "--force", ".")
        env = _git_env() | {
            "GIT_AUTHOR_NAME": _AUTHOR[0], "GIT_AUTHOR_EMAIL": _AUTHOR[1], "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": _AUTHOR[0], "GIT_COMMITTER_EMAIL": _AUTHOR[1], "GIT_COMMITTER_DATE": date,
        }
        repo.git.execute(["git", "-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify",
                          "--allow-empty", "-m", message], env=env)
        return repo.head.commit.hexsha
    finally:
        repo.close()


def _clone_into(origin: str, target: Path, sha: str, source: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=target.parent))
    try:
        try:
            repo = git.Repo.clone_from(origin, tmp / "r", env=_git_env(), no_checkout=True,
                                       kill_after_timeout=CLONE_TIMEOUT_S)
            repo.git.checkout("--detach", "--force", sha)
            repo.close()
        except git.GitError as exc:
            raise SourceError(f"cannot clone {source!r} at {sha[:12]} ({_first_line(exc)})") from exc
        _replace_dir(tmp / "r", target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replace_dir(src: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    os.replace(src, target)


def _is_checkout(target: Path, sha: str) -> bool:
    if not (target / ".git").exists():
        return False
    try:
        with git.Repo(target) as repo:
            return repo.head.commit.hexsha == sha
    except (git.GitError, ValueError):
        return False


def _snapshot(source: str, name: str, version: str, target: Path) -> RepoSnapshot:
    with git.Repo(target) as repo:
        commit = repo.head.commit
        created = commit.committed_datetime.astimezone(UTC).isoformat()
        return RepoSnapshot(source, name, version, str(target.resolve()), commit.hexsha, created)


def _git_env() -> dict[str, str]:
    return {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "fatal:" in ln or "error:" in ln.lower():
            return ln.strip("'\" ")
    return lines[0][:200] if lines else type(exc).__name__
