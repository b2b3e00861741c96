"""Scrub the environment the agent's tests run in: no installed copy of the project may be in it.

The same rules read two kinds of file tree: a virtualenv directory (local sandbox: the files are
removed) and a docker image (docker sandbox: ``image_removal_paths`` lists what the image must not
contain, for the image build to drop; the environment image should never hold the project at all).

What counts as the project's installed copy:

- every file the distribution's ``RECORD`` / ``installed-files.txt`` lists outside its metadata
  directory (the package, its byte code) and its ``direct_url.json`` (the path of the checkout it was
  installed from); the metadata itself stays, with ``RECORD`` rewritten, so ``importlib.metadata``
  still works (as ``sandboxes.local.strip_project_code`` leaves it);
- editable-install hooks: ``__editable__.<name>-*.pth``, ``__editable___<name>_*finder.py``,
  ``<name>.egg-link``, and ``.pth`` lines that point at a checkout of the project;
- top-level packages/modules of the project in ``site-packages`` that no other distribution owns;
- wheels and sdists of the project anywhere, and pip/uv caches (HTTP bodies, built wheels).

Stub files (``.pyi``, ``*-stubs`` packages) in the environment lose their declarations of deleted
entities, as in the workspace (``taskforge.audit.scrub.scrub_stub``).
"""

from __future__ import annotations

import csv
import io
import os
import posixpath
import re
import time
from collections.abc import Callable, Iterable
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from taskforge.audit.image_layers import iter_final_files
from taskforge.audit.scrub import ScrubReport, scrub_stub

_CACHE_MARKERS = (("pip", "http"), ("pip", "http-v2"), ("pip", "wheels"), ("pip", "selfcheck"))
_CACHE_DIRS = frozenset({"pip-cache", "uv-cache", ".pip-cache", ".uv-cache"})
_SITE = ("site-packages", "dist-packages")
_POINTERS = ("direct_url.json",)  # PEP 610: the URL/path of the checkout it was installed from


def normalize(name: str) -> str:
    """PEP 503 normalized distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _underscored(name: str) -> str:
    return normalize(name).replace("-", "_")


def wants_content(path: str) -> bool:
    """Files whose content the rules read (small metadata files), for ``iter_final_files``."""
    base = posixpath.basename(path)
    parent = posixpath.basename(posixpath.dirname(path))
    return (base in ("METADATA", "PKG-INFO", "RECORD", "installed-files.txt")
            and parent.endswith((".dist-info", ".egg-info"))) or base.endswith((".pth", ".egg-link"))


def find_installed(files: Iterable[str], read: Callable[[str], bytes | None], project_name: str,
                   package_dirs: Iterable[str] = ()) -> list[str]:
    """The paths in ``files`` (posix) that are the project's installed copy or a package cache."""
    listing = list(files)
    present = set(listing)
    project = normalize(project_name)
    proj_u = _underscored(project_name)
    top_names = {Path(p).name.removesuffix(".py") for p in package_dirs} | {proj_u}
    remove: set[str] = set()
    owned_by_others: set[str] = set()
    meta_dirs: dict[str, bool] = {}  # dist-info/egg-info dir -> is it the project's
    for path in listing:
        parent = posixpath.dirname(path)
        if parent.endswith((".dist-info", ".egg-info")) and parent not in meta_dirs:
            meta_dirs[parent] = _is_project_meta(parent, read, project)
        if path.endswith((".dist-info", ".egg-info")):  # an egg-info *file* (old setuptools)
            meta_dirs.setdefault(path, normalize(_dist_from_dirname(posixpath.basename(path))) == project)
    for meta, mine in meta_dirs.items():
        record = _record_paths(meta, read)
        if mine:  # its metadata stays (importlib.metadata works); its code and origin pointer go
            remove.update(p for p in record if p in present and not p.startswith(meta + "/"))
            remove.update(f"{meta}/{n}" for n in _POINTERS if f"{meta}/{n}" in present)
        else:
            owned_by_others.update(record)
    for path in listing:
        parts = path.split("/")
        base = parts[-1]
        in_site = any(s in parts[:-1] for s in _SITE)
        if _is_cache(parts) or _is_project_archive(base, project):
            remove.add(path)
        elif base.startswith((f"__editable__.{proj_u}-", f"__editable___{proj_u}_")) or \
                base in (f"{project}.egg-link", f"{proj_u}.egg-link"):
            remove.add(path)
        elif in_site and path not in owned_by_others and _is_top_level(parts, top_names):
            remove.add(path)
    return sorted(remove)


def _dist_from_dirname(name: str) -> str:
    return name.rsplit(".", 1)[0].split("-", 1)[0]


def _is_project_meta(meta: str, read: Callable[[str], bytes | None], project: str) -> bool:
    for fname in ("METADATA", "PKG-INFO"):
        data = read(f"{meta}/{fname}")
        if data:
            name = HeaderParser().parsestr(data.decode("utf-8", "replace")).get("Name", "")
            if name:
                return normalize(name) == project
    return normalize(_dist_from_dirname(posixpath.basename(meta))) == project


def _record_paths(meta: str, read: Callable[[str], bytes | None]) -> set[str]:
    base = posixpath.dirname(meta)
    out = set()
    for fname, at in (("RECORD", base), ("installed-files.txt", meta)):
        data = read(f"{meta}/{fname}")
        text = (data or b"").decode("utf-8", "replace")
        rows = csv.reader(io.StringIO(text)) if fname == "RECORD" else ([ln] for ln in text.splitlines())
        for row in rows:
            entry = row[0].strip() if row else ""
            if entry:
                out.add(posixpath.normpath(posixpath.join(at, entry)))
    return out


def _is_cache(parts: list[str]) -> bool:
    if any(p in _CACHE_DIRS for p in parts):
        return True
    for i in range(len(parts) - 2):
        if parts[i] == ".cache" and parts[i + 1] in ("pip", "uv"):
            return True
        if (parts[i], parts[i + 1]) in _CACHE_MARKERS:
            return True
    return False


def _is_project_archive(base: str, project: str) -> bool:
    if not base.endswith((".whl", ".tar.gz", ".zip", ".tar.bz2", ".egg")):
        return False
    return normalize(base.split("-", 1)[0]) == project


def _is_top_level(parts: list[str], top_names: set[str]) -> bool:
    site = max(i for i, p in enumerate(parts) if p in _SITE)
    rest = parts[site + 1:]
    if len(rest) > 1:
        if rest[0] == "__pycache__":
            return rest[1].split(".", 1)[0] in top_names
        return rest[0] in top_names
    stem = rest[0].split(".", 1)[0]
    return stem in top_names and rest[0].endswith((".py", ".so", ".pyd", ".pyi"))


def scrub_environment(env_dir: Path | str, project_name: str, package_dirs: Iterable[str] = (),
                      deleted: Iterable[str] = ()) -> ScrubReport:
    """Remove the project's installed copy and package caches from a virtualenv; edit its stubs."""
    start = time.perf_counter()
    root = Path(env_dir)
    files = []
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            files.append((Path(dirpath) / n).relative_to(root).as_posix())

    def read(rel: str) -> bytes | None:
        try:
            return (root / rel).read_bytes()
        except OSError:
            return None

    removed = find_installed(files, read, project_name, package_dirs)
    for rel in removed:
        (root / rel).unlink(missing_ok=True)
    _rewrite_records(root, files, set(removed))
    _prune_empty_dirs(root, {posixpath.dirname(r) for r in removed})
    entities = tuple(deleted)
    edited = []
    if entities:
        for rel in files:
            if rel.endswith(".pyi") and rel not in removed and (root / rel).is_file():
                outcome = scrub_stub(root / rel, root, entities)
                if outcome == "edited":
                    edited.append(rel)
                elif outcome == "removed":
                    removed.append(rel)
    edited.extend(_drop_checkout_paths(root, files, project_name, package_dirs))
    return ScrubReport(tuple(removed), tuple(edited), "", time.perf_counter() - start)


def _drop_checkout_paths(root: Path, files: list[str], project_name: str, package_dirs: Iterable[str]) -> list[str]:
    """Drop ``.pth`` path lines that put a checkout of the project (outside the env) on ``sys.path``."""
    names = {Path(p).name for p in package_dirs} | {_underscored(project_name)}
    edited = []
    for rel in files:
        path = root / rel
        if not rel.endswith(".pth") or not path.is_file():
            continue
        lines = path.read_text(errors="replace").splitlines()
        kept = [ln for ln in lines if not _is_checkout_line(ln, root, names)]
        if len(kept) != len(lines):
            edited.append(rel)
            if any(ln.strip() and not ln.startswith("#") for ln in kept):
                path.write_text("\n".join(kept) + "\n")
            else:
                path.unlink()
    return edited


def _is_checkout_line(line: str, root: Path, names: set[str]) -> bool:
    line = line.strip()
    if not line or line.startswith(("#", "import ", "import\t")):
        return False
    target = Path(line)
    if not target.is_absolute() or target.resolve().is_relative_to(root.resolve()):
        return False
    return any((target / n).exists() or (target / f"{n}.py").exists() for n in names)


def _rewrite_records(root: Path, files: list[str], removed: set[str]) -> None:
    """Drop the rows of removed files from every ``RECORD`` that listed them."""
    for rel in files:
        if not rel.endswith(".dist-info/RECORD") or rel in removed or not (root / rel).is_file():
            continue
        base = posixpath.dirname(posixpath.dirname(rel))
        rows = list(csv.reader(io.StringIO((root / rel).read_text(errors="replace"))))
        kept = [r for r in rows if r and posixpath.normpath(posixpath.join(base, r[0])) not in removed]
        if len(kept) != len([r for r in rows if r]):
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(kept)
            (root / rel).write_text(buf.getvalue())


def _prune_empty_dirs(root: Path, dirs: set[str]) -> None:
    for rel in sorted(dirs, key=lambda d: -d.count("/")):
        path = root / rel
        while path != root and path.is_dir() and not any(path.iterdir()):
            path.rmdir()
            path = path.parent


def image_removal_paths(image: Any, project_name: str, package_dirs: Iterable[str] = (),
                        client: Any = None) -> list[str]:
    """Absolute paths in ``image`` (tag or docker SDK ``Image``) that are the project or a package cache."""
    contents: dict[str, bytes | None] = {}
    files = []
    for path, data in iter_final_files(image, client, wants_content):
        files.append(path)
        if data is not None:
            contents[path] = data
    return find_installed(files, contents.get, project_name, package_dirs)
