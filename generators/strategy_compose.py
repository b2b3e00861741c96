"""Strategy ``compose`` (tier 2 + k): k independently validated deletions of one repository, one task.

A composition's candidate id names its parts: ``compose:<id 1>+<id 2>+...`` (each ``strategy:target``
as in the parts' own candidates). ``delete_candidate`` redoes each part's plan with its own strategy
against the original tree (each must still hold alone), then removes the union of their entities in one
libcst pass per file (``generators.deletion_build.build``): parts may share files and even lines (one
``__all__`` list, one ``from .mod import a, b``), and the imports only the removed code used go.
FAIL_TO_PASS is the union of the parts' hidden tests (the candidate's covering tests); validation keeps
as PASS_TO_PASS the reliable tests that stay green with all of them gone, and runs the whole contract
on the composed task. The parts are chosen from validated tasks by ``taskforge.pipeline.compose``.
Parts are ``delete``, ``module`` and ``feature`` deletions (a module part's file goes, and every import of the
module with it); never stubs: a stub keeps names that another part's hiding would remove from the tests.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from generators import cst_edit
from generators.candidates import Candidate
from generators.deletion import Deletion
from generators.deletion_build import build, module_name_of
from generators.static_index import StaticIndex
from generators.strategy_delete import deletion_edits
from taskforge.core.entities import Entity
from taskforge.core.outcomes import Rejected, RejectReason

SEPARATOR = "+"
PART_STRATEGIES = ("delete", "module", "feature")


def compose_id(part_ids: list[str]) -> str:
    return "compose:" + SEPARATOR.join(part_ids)


def part_ids(candidate_id: str) -> list[str]:
    body = candidate_id.split(":", 1)[1] if candidate_id.startswith("compose:") else candidate_id
    return [p for p in body.split(SEPARATOR) if p]


class ComposeStrategy:
    name = "compose"
    tier = 4  # for k = 2; ``generators.difficulty.tier_of`` gives 2 + k

    def applies_to(self, entity: Entity) -> bool:
        return False

    def delete(self, entity: Entity, index: StaticIndex, repo_root: Path) -> Deletion | Rejected:
        return Rejected(f"compose:{entity.qualname}", RejectReason.TRANSFORM_FAILED,
                        "a composition is made of validated deletions: call delete_candidate")

    def propose(self, profile: Any, seed: int = 0) -> list[Candidate]:
        return []  # the parts must be validated first: taskforge.pipeline.compose proposes compositions

    def delete_candidate(self, candidate: Candidate, profile: Any) -> Deletion | Rejected:
        from generators.registry import make_strategy

        cid = candidate.candidate_id
        ids = part_ids(cid)
        if len(ids) < 2:
            return Rejected(cid, RejectReason.TRANSFORM_FAILED, "a composition needs at least two parts")
        parts: list[Deletion] = []
        for pid in ids:
            strategy_name, _, target = pid.partition(":")
            if strategy_name not in PART_STRATEGIES:
                return Rejected(cid, RejectReason.TRANSFORM_FAILED, f"{pid}: {strategy_name} cannot be a part")
            strategy = make_strategy(strategy_name)
            if hasattr(strategy, "delete_candidate"):
                part = strategy.delete_candidate(Candidate(pid, strategy_name, "", (), 0.0, ""), profile)
            elif target in profile.index:
                part = strategy.delete(profile.index.entity(target), profile.index, profile.repo_dir)
            else:
                return Rejected(cid, RejectReason.TRANSFORM_FAILED, f"{pid}: no entity {target}")
            if isinstance(part, Rejected):
                return Rejected(cid, part.reason, f"part {pid}: {part.detail}")
            parts.append(part)
        return merge_deletions(parts, ids, profile.index, profile.repo_dir, cid)


def merge_deletions(parts: list[Deletion], ids: list[str], index: StaticIndex, repo_root: Path,
                    cid: str) -> Deletion | Rejected:
    """One ``Deletion`` doing all of ``parts``: their entities removed in one libcst pass per file."""
    deleted = list(dict.fromkeys(q for p in parts for q in p.deleted))
    if len(deleted) < sum(len(p.deleted) for p in parts):
        return Rejected(cid, RejectReason.DUPLICATE, "the parts delete some of the same entities")
    edits = deletion_edits([index.entity(q) for q in deleted], index)
    gone = sorted({f for p in parts for f, text in p.files_after.items() if text is None})
    for p in parts:
        if p.strategy == "module":
            _drop_module_imports(edits, index.entity(p.target), p.deleted, index)
    merged = build("compose", index.entity(parts[0].target), deleted, index, repo_root, edits, delete_files=gone,
                   dependents=[q for p in parts for q in p.dependents], helpers=[q for p in parts for q in p.helpers],
                   notes=[n for p in parts for n in p.notes], candidate_id=cid)
    if isinstance(merged, Rejected):
        return merged
    return dataclasses.replace(merged, extra={
        "k": len(parts), "parts": list(ids), "part_strategies": [p.strategy for p in parts],
        "part_targets": [p.target for p in parts],
        "interface": [q for p in parts for q in p.extra.get("interface", [p.target])]})


def _drop_module_imports(edits: dict[str, cst_edit.FileEdit], module: Entity, deleted: tuple[str, ...],
                         index: StaticIndex) -> None:
    """Every project file importing the removed ``module`` loses those imports (as ``module`` does it)."""
    for f in {r.file for q in deleted for r in index.entity(q).references
              if not r.is_test and r.kind in ("import", "reexport") and r.file != module.file}:
        base = edits.get(f) or cst_edit.FileEdit(module=module_name_of(f, index), is_package=f.endswith("__init__.py"))
        edits[f] = dataclasses.replace(base, remove_import_modules=base.remove_import_modules | {module.qualname})
