"""Strategy ``delete`` (tier 1): remove the entity entirely, with what only it needed.

The plan, from the static index:
1. the target and its members (methods of a class);
2. *dependents*: code outside the plan that still uses a planned entity. A small or private function,
   method or class (at most ``MAX_DEPENDENTS``, each at most ``MAX_DEPENDENT_STATEMENTS`` statements
   unless private, never a dunder) is deleted too and recorded; a use at module level, or by anything
   else, rejects the candidate with ``DEPENDENTS_REMAIN`` (the rest of the code must keep importing);
3. *helpers*: private functions/methods/classes the planned code uses that nothing else in the
   project's code uses (transitively);
4. imports of planned entities in other files (``from .mod import f``, package re-exports) and their
   ``__all__`` entries; then the imports the removal made unused.
Dynamic uses (``obj.meth()`` with an unknown receiver) do not block; they are noted, and validation
in the sandbox has the last word.

When step 2 rejects, the candidate may still become a *bigger* task (``plan_bigger``,
``generators.dependent_stubs``): the target goes and its few remaining users are stubbed (names kept,
bodies ``raise NotImplementedError``), so the agent implements all of them.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from generators import cst_edit
from generators.deletion import Deletion
from generators.deletion_build import USE_KINDS, build, is_use, module_name_of, removal_keys, top_level
from generators.dependent_stubs import MAX_STUBBED, stub_edits, stub_refusal
from generators.static_index import StaticIndex
from taskforge.core.entities import Entity, EntityKind, Reference
from taskforge.core.outcomes import Rejected, RejectReason

MAX_DEPENDENTS = 3
MAX_DEPENDENT_STATEMENTS = 6
_DELETABLE = (EntityKind.FUNCTION, EntityKind.METHOD, EntityKind.CLASS)


def _dunder(e: Entity) -> bool:
    name = e.qualname.rsplit(".", 1)[-1]
    return name.startswith("__") and name.endswith("__")


class DeleteStrategy:
    name = "delete"
    tier = 1

    def applies_to(self, entity: Entity) -> bool:
        return entity.kind in _DELETABLE and entity.statements > 0

    def delete(self, entity: Entity, index: StaticIndex, repo_root: Path) -> Deletion | Rejected:
        cid = f"delete:{entity.qualname}"
        if not self.applies_to(entity):
            return Rejected(cid, RejectReason.TRIVIAL_BODY, f"{entity.qualname} has no body to delete")
        plan = plan_or_bigger(entity, index, cid)
        if isinstance(plan, Rejected):
            return plan
        deleted, dependents, helpers, stubbed = plan
        edits = deletion_edits([index.entity(q) for q in deleted], index)
        edits = stub_edits(edits, [index.entity(q) for q in stubbed], index, repo_root)
        notes = _dynamic_notes(deleted, index)
        return build(self.name, entity, [*deleted, *stubbed], index, repo_root, edits, dependents=dependents,
                     helpers=helpers, notes=notes, candidate_id=cid, stubbed=stubbed)


def plan_deletion(target: Entity, index: StaticIndex, cid: str, max_dependents: int = MAX_DEPENDENTS
                  ) -> tuple[list[str], list[str], list[str]] | Rejected:
    """``(deleted qualnames, dependents, helpers)`` or why the target cannot be deleted cleanly."""
    deleted: dict[str, None] = {}
    dependents: list[str] = []
    helpers: list[str] = []

    def add(e: Entity) -> None:
        deleted[e.qualname] = None
        for m in index.members(e.qualname):
            deleted[m.qualname] = None

    add(target)
    for _ in range(50):
        owners = [index.entity(q) for q in deleted]
        outside = _outside_use(deleted, owners, index)
        if outside is not None:
            used, ref = outside
            dep = index.get(ref.in_entity) if ref.in_entity else None
            where = f"{ref.file}:{ref.line}"
            if dep is None:
                return Rejected(cid, RejectReason.DEPENDENTS_REMAIN,
                                f"{used} is used at module level ({where})")
            if not _cascadable(dep, index) or len(dependents) >= max_dependents:
                return Rejected(cid, RejectReason.DEPENDENTS_REMAIN, f"{dep.qualname} uses {used} ({where})")
            add(dep)
            dependents.append(dep.qualname)
            continue
        helper = _next_helper(deleted, owners, index)
        if helper is None:
            break
        add(helper)
        helpers.append(helper.qualname)
    return list(deleted), dependents, helpers


def plan_or_bigger(target: Entity, index: StaticIndex, cid: str, max_dependents: int = MAX_DEPENDENTS
                   ) -> tuple[list[str], list[str], list[str], list[str]] | Rejected:
    """``(deleted, dependents, helpers, stubbed)``: ``plan_deletion``, or when it rejects, ``plan_bigger``."""
    plan = plan_deletion(target, index, cid, max_dependents=max_dependents)
    if not isinstance(plan, Rejected):
        return (*plan, [])
    bigger = plan_bigger(target, index, cid, plan)
    if isinstance(bigger, Rejected):
        return bigger
    deleted, helpers, stubbed = bigger
    return deleted, [], helpers, stubbed


def plan_bigger(target: Entity, index: StaticIndex, cid: str, refused: Rejected, max_stubbed: int = MAX_STUBBED
                ) -> tuple[list[str], list[str], list[str]] | Rejected:
    """``(deleted, helpers, stubbed)``: delete the target, stub the users ``plan_deletion`` could not delete.

    ``refused`` is ``plan_deletion``'s rejection; returned as it is unless it is ``DEPENDENTS_REMAIN``;
    otherwise the rejection says why stubbing does not do either (``dependent_stubs.stub_refusal``).
    """
    if refused.reason is not RejectReason.DEPENDENTS_REMAIN:
        return refused
    deleted: dict[str, None] = {target.qualname: None}
    for m in index.members(target.qualname):
        deleted[m.qualname] = None
    stubbed: list[Entity] = []
    helpers: list[str] = []
    for _ in range(50):
        gone = [index.entity(q) for q in deleted]
        owners = gone + stubbed
        outside = _outside_use(deleted, owners, index)
        if outside is not None:
            used, ref = outside
            dep = index.get(ref.in_entity) if ref.in_entity else None
            where = f"{ref.file}:{ref.line}"
            why = stub_refusal(dep, used, where, index)
            if not why and len(stubbed) >= max_stubbed:
                why = f"more than {max_stubbed} users would be stubbed ({dep.qualname if dep else ''} uses {used}, {where})"
            if why:
                return refused if why == refused.detail else Rejected(
                    cid, RejectReason.DEPENDENTS_REMAIN, f"{refused.detail}; stubbing its users instead: {why}")
            assert dep is not None
            stubbed.append(dep)
            continue
        helper = _next_helper(deleted, owners, index)
        if helper is None:
            break
        deleted[helper.qualname] = None
        helpers.append(helper.qualname)
    return list(deleted), helpers, [e.qualname for e in stubbed]


def _outside_use(deleted: dict[str, None], owners: list[Entity], index: StaticIndex
                 ) -> tuple[str, Reference] | None:
    for q in deleted:
        for r in index.entity(q).references:
            if is_use(r) and not any(index.ref_inside(r, o) for o in owners):
                return q, r
    return None


def _cascadable(dep: Entity, index: StaticIndex) -> bool:
    if dep.kind not in _DELETABLE or _dunder(dep):
        return False
    return dep.is_private or dep.statements <= MAX_DEPENDENT_STATEMENTS


def _next_helper(deleted: dict[str, None], owners: list[Entity], index: StaticIndex) -> Entity | None:
    for q in list(deleted):
        for dq in index.dependencies(q, kinds=USE_KINDS):
            if dq in deleted:
                continue
            h = index.entity(dq)
            if not h.is_private or h.kind not in _DELETABLE or _dunder(h):
                continue
            uses = [r for r in h.references if is_use(r) and not index.ref_inside(r, h)]
            if uses and all(any(index.ref_inside(r, o) for o in owners) for r in uses):
                return h
    return None


def deletion_edits(entities: list[Entity], index: StaticIndex) -> dict[str, cst_edit.FileEdit]:
    """Per-file edits removing ``entities``, their imports elsewhere and their ``__all__`` entries."""
    remove_defs: dict[str, set[tuple[str, int]]] = defaultdict(set)
    imports: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    all_names: dict[str, set[str]] = defaultdict(set)
    for e in top_level(entities, index):
        remove_defs[e.file].update(removal_keys(e))  # overload declarations and setters too
    for e in entities:
        short = e.qualname.rsplit(".", 1)[-1]
        for r in e.references:
            if r.is_test:
                continue
            if r.kind in ("import", "reexport") and not r.in_entity:
                imports[r.file][r.line].add(short)
            elif r.kind == "all":
                all_names[r.file].add(short)
    files = set(remove_defs) | set(imports) | set(all_names)
    return {f: cst_edit.FileEdit(
        module=module_name_of(f, index), is_package=f.endswith("__init__.py"),
        remove_defs=frozenset(remove_defs.get(f, ())),
        remove_imports={line: frozenset(names) for line, names in imports.get(f, {}).items()},
        remove_all_names=frozenset(all_names.get(f, ())),
    ) for f in sorted(files)}


def _dynamic_notes(deleted: list[str], index: StaticIndex) -> list[str]:
    owners = [index.entity(q) for q in deleted]
    notes = []
    for q in deleted:
        refs = [r for r in index.entity(q).references if r.kind == "dynamic" and not r.is_test
                and not any(index.ref_inside(r, o) for o in owners)]
        if refs:
            notes.append(f"{q}: {len(refs)} possible dynamic use(s) remain, e.g. {refs[0].file}:{refs[0].line}")
    return notes
