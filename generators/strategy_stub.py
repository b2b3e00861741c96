"""Strategy ``stub`` (tier 0, the easiest): keep the signature and docstring, drop the body.

A function or method keeps its decorators, signature and docstring; its body becomes
``raise NotImplementedError``. For a class, every method of it (nested classes included) is stubbed.
A name defined several times keeps its ``@overload`` declarations and property setter as written; every
other definition that holds code is stubbed with it (``deletion_build.stub_keys``).
Everything else in the file keeps its bytes; imports that only the old bodies used are removed.
"""

from __future__ import annotations

from pathlib import Path

from generators import cst_edit
from generators.deletion import Deletion
from generators.deletion_build import build, module_name_of, stub_keys
from generators.static_index import StaticIndex
from taskforge.core.entities import Entity, EntityKind
from taskforge.core.outcomes import Rejected, RejectReason


class StubStrategy:
    name = "stub"
    tier = 0

    def applies_to(self, entity: Entity) -> bool:
        return entity.kind in (EntityKind.FUNCTION, EntityKind.METHOD, EntityKind.CLASS) and entity.statements > 0

    def delete(self, entity: Entity, index: StaticIndex, repo_root: Path) -> Deletion | Rejected:
        cid = f"stub:{entity.qualname}"
        if not self.applies_to(entity):
            return Rejected(cid, RejectReason.TRIVIAL_BODY, f"{entity.kind.value} {entity.qualname} has no body "
                            "to stub")
        if entity.kind is EntityKind.CLASS:
            targets = [m for m in index.members(entity.qualname)
                       if m.kind is EntityKind.METHOD and m.statements > 0]
            if not targets:
                return Rejected(cid, RejectReason.TRIVIAL_BODY, f"class {entity.qualname} has no method to stub")
        else:
            targets = [entity]
        source = (Path(repo_root) / entity.file).read_text(encoding="utf-8")
        lines = source.splitlines()
        targets = [t for t in targets if not _is_stub_text(lines[t.body_start - 1: t.body_end])]
        if not targets:
            return Rejected(cid, RejectReason.TRIVIAL_BODY, f"{entity.qualname} is already a stub")
        at_import = index.import_time_entities()
        runs = [t.qualname for t in targets if t.qualname in at_import]
        if runs:
            return Rejected(cid, RejectReason.IMPORT_BROKEN,
                            f"{', '.join(runs)} run(s) when the package is imported; a stub would break imports")
        edit = cst_edit.FileEdit(
            module=module_name_of(entity.file, index),
            replace_bodies={key: cst_edit.raise_not_implemented for t in targets for key in stub_keys(t, source)},
        )
        return build(self.name, entity, [t.qualname for t in targets], index, repo_root, {entity.file: edit},
                     candidate_id=cid)


def _is_stub_text(body_lines: list[str]) -> bool:
    code = [ln.strip() for ln in body_lines if ln.strip() and not ln.strip().startswith("#")]
    return len(code) == 1 and code[0].startswith("raise NotImplementedError")
