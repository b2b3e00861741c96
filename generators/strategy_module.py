"""Strategy ``module`` (tier 2, the hardest): remove a whole module file.

The module file is deleted; every import of it in the rest of the project's code goes
(``import pkg.mod``, ``from pkg.mod import x``, ``from . import mod`` re-exports, ``__all__`` entries);
code elsewhere that still *uses* the module is handled as in ``delete`` (small/private dependents
deleted and recorded, anything else rejects with ``DEPENDENTS_REMAIN``). A name imported from the
module that is not an indexed entity (a constant) and is still used also rejects the candidate.
Packages (``__init__.py``) are not removed.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from generators import cst_edit
from generators.deletion import Deletion
from generators.deletion_build import build
from generators.dependent_stubs import stub_edits
from generators.static_index import StaticIndex
from generators.strategy_delete import MAX_DEPENDENTS, deletion_edits, plan_or_bigger
from taskforge.core.entities import Entity, EntityKind
from taskforge.core.outcomes import Rejected, RejectReason


class ModuleStrategy:
    name = "module"
    tier = 2

    def __init__(self, max_dependents: int = MAX_DEPENDENTS) -> None:
        self.max_dependents = max_dependents

    def applies_to(self, entity: Entity) -> bool:
        return entity.kind is EntityKind.MODULE and not entity.file.endswith("__init__.py") \
            and entity.statements > 0

    def delete(self, entity: Entity, index: StaticIndex, repo_root: Path) -> Deletion | Rejected:
        cid = f"module:{entity.qualname}"
        if not self.applies_to(entity):
            return Rejected(cid, RejectReason.TRIVIAL_BODY,
                            f"{entity.qualname} is a package or an empty module; only plain modules are removed")
        # a bigger task when needed: the users the plan could not delete are stubbed (strategy_delete.plan_bigger)
        plan = plan_or_bigger(entity, index, cid, max_dependents=self.max_dependents)
        if isinstance(plan, Rejected):
            return plan
        deleted, dependents, helpers, stubbed = plan
        entities = [index.entity(q) for q in deleted]
        edits = {f: e for f, e in deletion_edits(entities, index).items() if f != entity.file}
        # every project file that imports the module loses those imports
        importers = {r.file for q in deleted for r in index.entity(q).references
                     if not r.is_test and r.kind in ("import", "reexport") and r.file != entity.file}
        for f in importers:
            base = edits.get(f) or cst_edit.FileEdit(module=_module_of(f, index),
                                                     is_package=f.endswith("__init__.py"))
            edits[f] = replace(base, remove_import_modules=base.remove_import_modules | {entity.qualname})
        edits = stub_edits(edits, [index.entity(q) for q in stubbed], index, repo_root)
        return build(self.name, entity, [*deleted, *stubbed], index, repo_root, edits, delete_files=[entity.file],
                     dependents=dependents, helpers=helpers, candidate_id=cid, stubbed=stubbed)


def _module_of(file: str, index: StaticIndex) -> str:
    mod = index.module_for_file(file)
    return mod.qualname if mod is not None else ""
