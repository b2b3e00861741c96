"""Bigger ``delete``/``module`` tasks: the target's few users are stubbed instead of rejecting the candidate.

A deletion whose target is still used by code it cannot delete (a public function of more than a few
statements, a dunder the cascade refuses) used to be rejected with ``DEPENDENTS_REMAIN``. When those users
are few (at most ``MAX_STUBBED``) functions or methods of the package, the candidate becomes a bigger task
instead: the target is deleted and each user keeps its name and signature but its body becomes
``raise NotImplementedError`` (as ``strategy_stub`` does), so the agent implements all of them. Their
names stay, so nothing that calls *them* breaks; the hidden tests are the union of the tests covering the
target and the tests covering each stubbed user (``covering_of_stubbed``).

Still rejected (``stub_refusal`` says why): a use at module level or in a class body (nothing to stub),
a user that runs at import time (a stub would break the import), a dunder (used implicitly by unrelated
code), and more than ``MAX_STUBBED`` users.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from generators import cst_edit
from generators.deletion import Deletion
from generators.deletion_build import module_name_of, stub_keys
from generators.static_index import StaticIndex
from taskforge.core.entities import Entity, EntityKind

MAX_STUBBED = 3


def stub_refusal(dep: Entity | None, used: str, where: str, index: StaticIndex) -> str:
    """Why the user ``dep`` of ``used`` cannot be stubbed ("" = it can)."""
    if dep is None or dep.kind is EntityKind.MODULE:
        return f"{used} is used at module level ({where})"
    if dep.kind is EntityKind.CLASS:
        return f"{dep.qualname} uses {used} in its class body ({where})"
    name = dep.qualname.rsplit(".", 1)[-1]
    if name.startswith("__") and name.endswith("__"):
        return f"{dep.qualname} uses {used} ({where}); a dunder is called implicitly, it is not stubbed"
    if dep.statements <= 0:
        return f"{dep.qualname} uses {used} ({where}) but has no body to stub"
    if dep.qualname in index.import_time_entities():
        return f"{dep.qualname} uses {used} ({where}) and runs when the package is imported"
    return ""


def stub_edits(edits: Mapping[str, cst_edit.FileEdit], stubbed: list[Entity], index: StaticIndex,
               repo_root: Path) -> dict[str, cst_edit.FileEdit]:
    """``edits`` plus, per file, the bodies of ``stubbed`` replaced by ``raise NotImplementedError`` (each
    definition that holds their code, as ``strategy_stub`` does: ``deletion_build.stub_keys``)."""
    out = dict(edits)
    for e in stubbed:
        base = out.get(e.file) or cst_edit.FileEdit(module=module_name_of(e.file, index),
                                                    is_package=e.file.endswith("__init__.py"))
        source = (Path(repo_root) / e.file).read_text(encoding="utf-8") if e.alternates else ""
        bodies = {**base.replace_bodies, **dict.fromkeys(stub_keys(e, source), cst_edit.raise_not_implemented)}
        out[e.file] = replace(base, replace_bodies=bodies)
    return out


def covering_of_stubbed(deletion: Deletion, profile: Any) -> frozenset[str]:
    """Reliable tests covering the stubbed users: hidden tests of the bigger task too."""
    from generators.candidates import covering_tests

    out: set[str] = set()
    for q in deletion.stubbed:
        e = profile.index.get(q)
        if e is not None:
            out |= covering_tests(e, profile)
    return frozenset(out)


def task_label(deletion: Deletion) -> str:
    """What the task is about, for its instance id: the target, ``+`` each stubbed user's short name."""
    return "+".join([deletion.target, *(q.rsplit(".", 1)[-1] for q in deletion.stubbed)])
