"""The leak audit: prove that nothing the agent can see holds the body of the deleted code.

Channels searched (each a ``LeakHit.channel``):

- ``workspace``: every file of the agent's workspace except ``.git`` (text, HTML, ``.pyc``, archives);
  plus three rules that need no body: a type-checker cache (``.mypy_cache``, ``.pytype``, ``.pyre``...,
  derived from the original code: it holds the deleted signatures and types), a stub (``.pyi``)
  that still declares a deleted entity, and a definition of a deleted or stubbed name that still holds
  code (``live_defs``: it does not depend on which source the caller fingerprinted).
- ``git``: every object in the workspace's git store, reachable or not, loose or packed
  (``git cat-file --batch-all-objects``): history, reflog, stash, tags and dangling objects all live
  there; plus remotes, alternates and ``.git`` files that point at another object store.
- ``environment``: every file of the virtualenv the tests run in (local sandbox).
- ``image``: every file of every layer of the environment image (docker sandbox), read from the
  docker SDK's ``image.save()`` stream: a file deleted in a later layer is still in an earlier one.
  The layers of the base image (``base_image``: a setting, built before any repository is seen) are
  not searched, as the local sandbox does not search the system interpreter: the Python standard
  library holds lines that a deleted body may share, and a match there is not a leak of the task.

In the environment and the image (third-party files) a hit needs a *copy* of the deleted code
(``Scanner.scan(strict=True)``): most of a body, or its byte code; a short generic line that another
package shares is no leak.

``audit_task_workspace`` is the entry point for the generator (a hit => ``RejectReason.LEAK_FOUND``)
and the ``taskforge audit`` command. Files larger than ``leak_scan.MAX_BLOB`` are not read (native
libraries of other packages); archives are searched member by member.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from taskforge.audit.fingerprints import FingerprintSet, fingerprint
from taskforge.audit.git_objects import GitStoreUnreadable, iter_git_objects, pointer_hits
from taskforge.audit.image_layers import SavedImage, base_layer_ids, cached_image_layers
from taskforge.audit.leak_scan import BlobHit, Scanner
from taskforge.audit.live_defs import live_definitions
from taskforge.audit.scrub import TYPECHECKER_CACHES, is_artefact_dir, stub_declarations
from taskforge.core.task import AuditResult, LeakHit

SOURCE_SUFFIXES = (".py",)
_THIRD_PARTY = frozenset({"environment", "image", "interpreter"})  # channels of other packages' files: copies only
READ_THREADS = 8


def audit_task_workspace(workspace: Path | str, deleted_sources: Mapping[str, str],
                         env_dir: Path | str | None = None, image: Any = None, *,
                         allowed_text: Iterable[str] = (), docker_client: Any = None,
                         image_cache: Path | str | None = None, base_image: Any = None,
                         env_index: Any = None, stdlib: Path | str | None = None,
                         stdlib_skip: Iterable[str] = (), stdlib_index: Any = None,
                         src_roots: Iterable[str] = (".",)) -> AuditResult:
    """Fingerprint ``deleted_sources`` (qualname -> original source) against the workspace, then audit;
    first, every definition of those names left in the workspace must hold no code (``live_defs``; the
    modules are found under ``src_roots``, as the qualified names were made).

    ``allowed_text``: what the agent is given anyway (problem statement); fingerprints in it are
    dropped. ``env_dir``: the virtualenv (local sandbox); ``image``: an image tag or docker SDK
    ``Image`` (docker sandbox); ``docker_client`` defaults to ``docker.from_env()``;
    ``image_cache``: a folder where each image's layers are extracted once and reused by later
    audits (``None``: stream ``image.save()`` every time); ``base_image``: the image ``image`` was
    built from, whose layers are not searched (``None``: search every layer); ``stdlib``: the standard
    library the runs import (channel ``interpreter``), less its ``stdlib_skip`` folders (``stdlib_index``: an
    ``EnvironmentIndex`` of it).
    """
    start = time.perf_counter()
    workspace = Path(workspace)
    # first, and needing no fingerprint: the fingerprints find a body left in place only when given that body
    live = tuple(live_definitions(workspace, deleted_sources, src_roots))
    fps = fingerprint(deleted_sources, _remaining_code(workspace), allowed_text)
    result = audit(workspace, fps, env_dir=env_dir, image=image, docker_client=docker_client,
                   image_cache=image_cache, base_image=base_image, env_index=env_index, stdlib=stdlib,
                   stdlib_skip=stdlib_skip, stdlib_index=stdlib_index)
    return AuditResult(result.channels, (*live, *result.hits), result.fingerprints, time.perf_counter() - start)


def audit(workspace: Path | None, fps: FingerprintSet, *, env_dir: Path | str | None = None,
          image: Any = None, docker_client: Any = None, git: bool = True,
          image_cache: Path | str | None = None, base_image: Any = None, env_index: Any = None,
          stdlib: Path | str | None = None, stdlib_skip: Iterable[str] = (), stdlib_index: Any = None) -> AuditResult:
    """Search every channel given for ``fps``; ``AuditResult.passed`` is True when nothing was found.

    ``git=False`` skips the workspace's git store (only to measure channels apart: a task's audit
    always includes it). ``env_index``: an ``env_index.EnvironmentIndex`` of ``env_dir``; its files are
    then judged from the index (when it covers ``fps``) instead of being read again.
    """
    start = time.perf_counter()
    scanner = Scanner(fps)
    channels: list[str] = []
    hits: list[LeakHit] = []
    if workspace is not None:
        channels.append("workspace")
        hits.extend(_workspace_hits(Path(workspace), scanner))
        if git:
            channels.append("git")
            hits.extend(_git_hits(Path(workspace), scanner))
    if env_dir is not None:
        channels.append("environment")
        indexed = env_index.hits(scanner) if env_index is not None and env_index.covers(fps) else None
        hits.extend(indexed if indexed is not None else _tree_hits("environment", Path(env_dir), scanner))
        hits.extend(_pointer_hits(Path(env_dir), workspace, scanner))
        hits.extend(_git_hits(Path(env_dir), scanner, "environment", pointers=False))  # VCS checkouts
    if stdlib is not None:  # copies of PyPI projects in the standard library (zipfile: zipp), never hideable
        channels.append("interpreter")
        indexed = stdlib_index.hits(scanner, "interpreter") \
            if stdlib_index is not None and stdlib_index.covers(fps) else None
        hits.extend(indexed if indexed is not None else _tree_hits("interpreter", Path(stdlib), scanner,
                                                                   skip=stdlib_skip))
    if image is not None:
        channels.append("image")
        hits.extend(_image_hits(image, scanner, docker_client, image_cache, base_image))
    return AuditResult(tuple(channels), tuple(hits), len(fps), time.perf_counter() - start)


def _image_hits(image: Any, scanner: Scanner, client: Any, image_cache: Path | str | None,
                base_image: Any) -> list[LeakHit]:
    """Hits in the image's layers (paths ``<diff id, 12 hex>:/<path>``), the base image's layers left out."""
    skip = base_layer_ids(image, base_image, client)
    if image_cache is not None:
        return [LeakHit("image", f"{diff_id.removeprefix('sha256:')[:12]}:/{h.path}", h.evidence)
                for diff_id, folder in cached_image_layers(image, Path(image_cache), client, scanner.wants)
                if diff_id not in skip
                for h in _tree_hits("image", folder, scanner)]
    hits: list[LeakHit] = []
    for layer in SavedImage(image, client).layers(scanner.wants):
        found = [(path, h) for path, data in layer.files() for h in scanner.scan(data, path, strict=True)]
        if layer.diff_id not in skip:  # known once the layer is read
            hits.extend(LeakHit("image", _join(f"{layer.short}:/{path}", h.where), h.evidence()) for path, h in found)
    return hits


def _join(path: str, where: str) -> str:
    return f"{path}!{where}" if where else path


def _remaining_code(workspace: Path) -> Iterator[bytes]:
    """The workspace's own source files: what a fingerprint must not also be found in."""
    for path in _walk(workspace, skip_artefacts=True):
        if path.suffix in SOURCE_SUFFIXES:
            try:
                yield path.read_bytes()
            except OSError:
                continue


def _walk(root: Path, *, skip_artefacts: bool = False, skip: Iterable[str] = ()) -> Iterator[Path]:
    """Regular files under ``root`` (symlinks not followed), git stores excluded (see ``_git_hits``), and
    the folders ``skip`` (relative to ``root``) too."""
    pruned = {root / s for s in skip}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if d != ".git" and here / d not in pruned]  # git: the git channel
        if skip_artefacts:
            dirnames[:] = [d for d in dirnames if not is_artefact_dir(here / d, root)]
        for name in filenames:
            path = here / name
            if path.is_file() and not path.is_symlink():
                yield path


def _tree_hits(channel: str, root: Path, scanner: Scanner, skip: Iterable[str] = ()) -> Iterator[LeakHit]:
    """Scan every file under ``root`` but ``skip``; reads overlap on a few threads (the search releases the GIL)."""
    for path, hit in scan_tree(root, scanner, strict=channel in _THIRD_PARTY, skip=skip):
        yield LeakHit(channel, path, hit.evidence())


def scan_tree(root: Path, scanner: Scanner, *, strict: bool, collect: bool = False,
              skip: Iterable[str] = ()) -> Iterator[tuple[str, BlobHit]]:
    """``(path, hit)`` for every file under ``root`` (``path!member`` inside archives) but the folders
    ``skip``, as ``Scanner.scan`` finds them (``collect``: every blob holding any fingerprint)."""
    def one(path: Path) -> list[tuple[str, BlobHit]]:
        try:
            if not scanner.wants(path.stat().st_size):
                return []
            with path.open("rb") as f:
                head = f.read(8)
                if scanner.skips_native(path.name, head):
                    return []
                data = head + f.read()
        except OSError:
            return []
        rel = path.relative_to(root).as_posix()
        return [(_join(rel, h.where), h) for h in scanner.scan(data, path.name, strict=strict, collect=collect)]

    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        for hits in pool.map(one, _walk(root, skip=skip)):
            yield from hits


def _workspace_hits(workspace: Path, scanner: Scanner) -> Iterator[LeakHit]:
    yield from _tree_hits("workspace", workspace, scanner)
    for dirpath, dirnames, _files in os.walk(workspace):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for d in dirnames:
            if d in TYPECHECKER_CACHES:
                rel = (Path(dirpath) / d).relative_to(workspace).as_posix()
                yield LeakHit("workspace", rel, f"type-checker cache {d} left in the workspace: built from "
                              "the original code, it holds the deleted entity's signature and types")
    for path in _walk(workspace):
        if path.suffix == ".pyi":
            declared = stub_declarations(path, workspace, scanner.fingerprints.entities)
            for qualname in declared:
                yield LeakHit("workspace", path.relative_to(workspace).as_posix(),
                              f"stub still declares deleted entity {qualname}")


def _git_hits(root: Path, scanner: Scanner, channel: str = "git", pointers: bool = True) -> Iterator[LeakHit]:
    """Every git store under ``root`` (its objects, reachable or not, and content files)."""
    if pointers:
        for path, evidence in pointer_hits(root):
            yield LeakHit(channel, path, evidence)
    try:
        for label, _kind, data in iter_git_objects(root):
            for hit in scanner.scan(data, "", strict=channel in _THIRD_PARTY):
                yield LeakHit(channel, _join(label, hit.where), hit.evidence())
    except GitStoreUnreadable as exc:
        yield LeakHit(channel, ".git", f"git store could not be read, so it cannot be proven clean: {exc}")


_QUOTED_PATH = re.compile(r"""['"](/[^'"\n]+)['"]""")
MAX_POINTED_FILES = 20_000


def _pointer_hits(env_dir: Path, workspace: Path | None, scanner: Scanner) -> Iterator[LeakHit]:
    """Follow ``.pth`` path lines, editable finders and ``direct_url.json`` to directories outside the env.

    What they point at is importable by the agent, so it is searched like the environment itself.
    """
    inside = [env_dir.resolve()] + ([workspace.resolve()] if workspace is not None else [])
    for pth in _walk(env_dir):
        if not (pth.suffix == ".pth" or pth.name == "direct_url.json"
                or (pth.name.startswith("__editable__") and pth.suffix == ".py")):
            continue
        text = pth.read_text(errors="replace")
        if pth.suffix == ".pth":
            targets = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("/")]
        elif pth.name == "direct_url.json":  # PEP 610: where a distribution was installed from
            targets = [unquote(u[len("file://"):]) for u in re.findall(r'"url":\s*"(file://[^"]+)"', text)]
        else:
            targets = _QUOTED_PATH.findall(text)
        for target in dict.fromkeys(targets):
            where = Path(target)
            if not where.exists() or any(where.resolve().is_relative_to(i) for i in inside):
                continue
            files = [where] if where.is_file() else list(_walk(where))[:MAX_POINTED_FILES]
            for f in files:
                if f.suffix not in (".py", ".pyi", ".pyc") or not scanner.wants(f.stat().st_size):
                    continue
                for hit in scanner.scan(f.read_bytes(), f.name, strict=True):
                    yield LeakHit("environment", f"{pth.relative_to(env_dir).as_posix()} -> {f}",
                                  hit.evidence())
