"""Vet an agent's patch before grading, and apply what survives to the grading workspace.

Threat model: the patch is written by a policy that is rewarded for making tests pass, by any means.
``vet_patch`` parses the unified diff with ``unidiff`` and

- **refuses** the whole patch (``PatchError``; the reward scores 0 with the flag ``patch_refused``) when a
  file section: escapes the repository (absolute path, ``..``), touches ``.git/``, creates a symlink
  (mode 120000) or a gitlink/submodule (160000), carries binary data, or adds a top-level module that
  would shadow the standard library or the test tooling (a ``json.py`` or ``pytest/`` on ``PYTHONPATH``
  is imported by the runner before any check could run);
- **drops** sections that touch test files or test-support files (``conftest.py``, pytest/tox/setup.cfg/
  pyproject configuration, ``sitecustomize``/``usercustomize``, ``*.pth``, pytest plugin modules): the
  grader restores those from the original anyway; dropping is recorded so the reward can flag it.

``apply_vetted`` applies the rest with ``git apply`` (argv list, timeout, process group killed),
repository discovery fenced off. The grading workspace is checked again after the fact (no symlink
may appear), so a parser differential between ``unidiff`` and git cannot smuggle one in.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import unidiff

from taskforge.core.errors import PatchError
from taskforge.core.patches import apply
from taskforge.reward.protected import (  # noqa: F401 - re-exported: the patch guard's vocabulary
    SHADOW_GUARDED,
    STARTUP_HOOKS,
    SUPPORT_NAMES,
    TEST_DIR_NAMES,
    ProtectedPaths,
)


@dataclass(frozen=True, slots=True)
class VettedPatch:
    """The part of an agent's patch that may be applied, and what was dropped from it."""

    text: str  # unified diff of the allowed file sections ("" when nothing is left)
    files: tuple[str, ...]  # workspace-relative paths the allowed sections touch
    dropped: tuple[str, ...]  # protected paths whose sections were removed
    startup_hooks: tuple[str, ...] = ()  # dropped sitecustomize/usercustomize/.pth files (never legitimate)

    def to_dict(self) -> dict[str, object]:
        return {"files": list(self.files), "dropped": list(self.dropped), "startup_hooks": list(self.startup_hooks)}


def _clean_path(raw: str | None) -> str | None:
    """Strip git's a/ b/ prefix; None for /dev/null. Raises PatchError for paths outside the repository."""
    if raw is None:
        return None
    raw = raw.strip()
    if raw == "/dev/null":
        return None
    if raw.startswith('"'):
        raise PatchError(f"patch path {raw} is quoted (control or non-ASCII characters); refused")
    if raw.startswith(("a/", "b/")):
        raw = raw[2:]
    p = PurePosixPath(raw)
    if p.is_absolute() or raw.startswith("~") or "\\" in raw:
        raise PatchError(f"patch touches {raw!r}, outside the repository; only relative paths are allowed")
    if ".." in p.parts or not p.parts:
        raise PatchError(f"patch path {raw!r} escapes the repository ('..'); refused")
    if ".git" in p.parts:
        raise PatchError(f"patch touches {raw!r} inside .git/; refused")
    return p.as_posix()


def _header_problem(info: str) -> str | None:
    for line in info.splitlines():
        low = line.lower()
        if ("mode 120000" in low) or low.startswith("new file mode 12") or low.startswith("new mode 12"):
            return "creates a symlink (mode 120000)"
        if "160000" in low or low.startswith("subproject commit"):
            return "touches a submodule/gitlink (mode 160000)"
        if low.startswith("git binary patch") or (low.startswith("binary files") and low.endswith("differ")):
            return "carries binary data"
        if low.startswith(("copy from", "copy to")):
            return "copies files (copy from/to)"
    return None


def vet_patch(patch: str, protected: ProtectedPaths) -> VettedPatch:
    """Parse ``patch``; refuse it (``PatchError``) or return its allowed part. Empty patch -> empty result."""
    if not patch.strip():
        return VettedPatch("", (), ())
    if "\x00" in patch:
        raise PatchError("patch contains NUL bytes (binary data); refused")
    try:
        parsed = unidiff.PatchSet(patch)
    except unidiff.UnidiffParseError as exc:
        raise PatchError(f"patch is not a valid unified diff ({exc}); send `git diff` output") from None
    if not len(parsed) and patch.strip():
        raise PatchError("patch holds no file section (expected `diff --git a/X b/X` / `--- a/X` / `+++ b/X`)")
    kept: list[str] = []
    files: list[str] = []
    dropped: list[str] = []
    hooks: list[str] = []
    for section in parsed:
        problem = _header_problem(str(section.patch_info)) or ("carries binary data" if section.is_binary_file
                                                                 else None)
        paths = [q for q in (_clean_path(section.source_file), _clean_path(section.target_file)) if q]
        where = ", ".join(dict.fromkeys(paths)) or "?"
        if problem:
            raise PatchError(f"patch section for {where} {problem}; refused")
        if not paths:
            raise PatchError("patch section has neither a source nor a target path; refused")
        kinds = [protected.kind(q) for q in paths]
        if any(kinds):
            dropped.extend(paths)
            hooks.extend(q for q in paths if PurePosixPath(q).name in STARTUP_HOOKS or q.endswith(".pth"))
            continue
        for q in paths:
            if protected.shadows(q):
                raise PatchError(f"patch adds {q!r}, which would shadow a standard-library or test-tool "
                                 "module on the import path; refused")
        kept.append(_section_text(section))
        files.extend(paths)
    return VettedPatch("".join(kept), tuple(dict.fromkeys(files)), tuple(dict.fromkeys(dropped)),
                       tuple(dict.fromkeys(hooks)))


def _section_text(section: unidiff.PatchedFile) -> str:
    text = str(section)
    return text if text.endswith("\n") else text + "\n"


def apply_vetted(workdir: Path, vetted: VettedPatch, *, timeout_s: float = 60.0) -> None:
    """``git apply`` the allowed part into ``workdir``; ``PatchError`` when it does not apply."""
    apply(vetted.text, workdir, what="agent patch", timeout_s=timeout_s)


def symlinks_in(root: Path, allowed: Iterable[str] = ()) -> list[str]:
    """Workspace-relative symlinks under ``root`` that are not in ``allowed`` (the original's own)."""
    ok = set(allowed)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            if full.is_symlink():
                rel = full.relative_to(root).as_posix()
                if rel not in ok:
                    found.append(rel)
    return sorted(found)
