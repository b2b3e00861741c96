"""Turn a plan (which entities go, which import lines and ``__all__`` names go) into a ``Deletion``.

Shared by the three strategies: reads the touched files, edits each with ``generators.cst_edit``,
drops the imports the edit made unused, checks that no removed name is still used and that every
file still compiles, and computes the metrics ``Deletion`` carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import libcst as cst

from generators import cst_edit, cst_metrics
from generators.deletion import Deletion, removed_lines
from generators.static_index import StaticIndex, contains
from taskforge.core import pyparse
from taskforge.core.definitions import definitions
from taskforge.core.entities import Entity, Reference
from taskforge.core.outcomes import Rejected, RejectReason

USE_KINDS = frozenset({"call", "name", "attribute"})


def stub_keys(e: Entity, source: str) -> list[cst_edit.DefKey]:
    """The definitions whose bodies a stub of ``e`` replaces (``source``: its file): the implementation, and
    each alternate implementation that holds code (of an ``if``/``else`` pair, the branch left alone would be
    the answer in the agent's workspace).

    ``@overload`` declarations stay as written: their bodies are ``...`` already, and their signatures are
    the interface, which a stub keeps by design (as it keeps the implementation's signature and docstring).
    A property's setter and deleter stay too: functions of their own, none of the getter's code.
    """
    keys = [(e.qualname, e.start_line)]
    if e.alternates:
        try:
            code = {d.start_line for d in definitions(pyparse.parse(source)) if d.holds_code}
        except SyntaxError:  # libcst read it for the index; then stub them all (``build`` reports what fails)
            code = {a.start_line for a in e.alternates}
        keys += [(e.qualname, a.start_line) for a in e.alternates if a.start_line in code]
    return keys


def removal_keys(e: Entity) -> list[cst_edit.DefKey]:
    """Every definition of ``e``'s name: a deletion removes them all.

    The ``@overload`` declarations go with the implementation. Left behind, they would describe the deleted
    API to the agent and keep its name bound (``typing.overload`` binds a function that raises
    ``NotImplementedError``): imports of the name would still work, unlike every other deletion, and
    ``Deletion.removed`` would be wrong. A property's setter and deleter go with the getter: ``@x.setter``
    with no ``x`` left fails the class body at import. The alternates go, as a stub stubs them.
    """
    return [(e.qualname, start) for start, _end in e.spans]


def top_level(entities: Iterable[Entity], index: StaticIndex) -> list[Entity]:
    """Entities not defined inside another entity of the same collection."""
    es = list(entities)
    return [e for e in es if not any(contains(o, e) for o in es)]


def fan_in(deleted: set[str], index: StaticIndex) -> int:
    """Uses of the deleted entities from non-test code outside them."""
    owners = [index.entity(q) for q in deleted]
    n = 0
    for q in deleted:
        for r in index.entity(q).references:
            if r.is_test or r.kind not in USE_KINDS:
                continue
            if not any(index.ref_inside(r, o) for o in owners):
                n += 1
    return n


def build(strategy: str, target: Entity, deleted: list[str], index: StaticIndex, repo_root: Path,
          edits: Mapping[str, cst_edit.FileEdit], *, delete_files: Iterable[str] = (),
          dependents: Iterable[str] = (), helpers: Iterable[str] = (), notes: Iterable[str] = (),
          candidate_id: str = "", stubbed: Iterable[str] = ()) -> Deletion | Rejected:
    """Apply ``edits`` (per file) and ``delete_files``; return the ``Deletion`` or why it cannot be done."""
    cid = candidate_id or f"{strategy}:{target.qualname}"
    before: dict[str, str | None] = {}
    after: dict[str, str | None] = {}
    removed_nodes: list[cst.CSTNode] = []
    for rel in sorted(set(edits) | set(delete_files)):
        try:
            before[rel] = (Path(repo_root) / rel).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return Rejected(cid, RejectReason.TRANSFORM_FAILED, f"cannot read {rel}: {exc}")
    for rel in delete_files:
        after[rel] = None
        removed_nodes.append(cst.parse_module(before[rel] or ""))
    for rel, edit in sorted(edits.items()):
        if rel in after:
            continue
        text = before[rel] or ""
        try:
            result = cst_edit.edit_file(text, edit)
        except cst.ParserSyntaxError as exc:
            return Rejected(cid, RejectReason.TRANSFORM_FAILED, f"libcst cannot parse {rel}: {exc}")
        except (cst.CSTValidationError, ValueError, TypeError, AttributeError, IndexError) as exc:
            # a construct the codemod cannot rebuild (libcst refuses the edited tree): name it, never a trace
            return Rejected(cid, RejectReason.TRANSFORM_FAILED,
                            f"libcst cannot apply the edit to {rel} ({type(exc).__name__}: {str(exc)[:300]})")
        wanted = set(edit.remove_defs) | set(edit.replace_bodies)
        missing = wanted - result.matched
        if missing:
            return Rejected(cid, RejectReason.TRANSFORM_FAILED,
                            f"{rel}: definitions not found where the index put them: {sorted(missing)}")
        fin = cst_edit.finalize(text, result.text, result.removed_bindings)
        removed_nodes.extend(result.removed_nodes)
        after[rel] = fin.text
        if fin.dropped:
            notes = [*notes, f"{rel}: removed imports made unused: {', '.join(sorted(fin.dropped))}"]
        # Safety net: nothing left may use a name the deletion unbound
        if fin.dangling:
            return Rejected(cid, RejectReason.DEPENDENTS_REMAIN,
                            f"{rel} still uses {', '.join(fin.dangling)} after the deletion")
    for rel, new in after.items():  # and every file must compile
        if new is None:
            continue
        try:
            compile(new, rel, "exec")
        except SyntaxError as exc:
            line = (exc.text or "").strip()[:120]
            return Rejected(cid, RejectReason.TRANSFORM_FAILED,
                            f"{rel} no longer compiles: {exc}" + (f" at {line!r}" if line else ""))
    changed = {k for k in after if after[k] != before.get(k)}
    if not changed:
        return Rejected(cid, RejectReason.TRIVIAL_BODY, "the deletion changes nothing")
    ents = [index.entity(q) for q in deleted if q in index]
    tops = top_level(ents, index)
    return Deletion(
        strategy=strategy, target=target.qualname, deleted=tuple(deleted),
        files_before={k: before[k] for k in sorted(changed)}, files_after={k: after[k] for k in sorted(changed)},
        lines_deleted=removed_lines({k: before[k] for k in changed}, {k: after[k] for k in changed}),
        statements_deleted=sum(e.statements for e in tops), complexity=sum(e.complexity for e in tops),
        fan_in=fan_in(set(deleted) & {e.qualname for e in ents}, index),
        fan_out=len(cst_metrics.called_names(removed_nodes)),
        dependents=tuple(dependents), helpers=tuple(helpers), stubbed=tuple(stubbed), notes=tuple(notes),
    )


def module_name_of(file: str, index: StaticIndex) -> str:
    mod = index.module_for_file(file)
    return mod.qualname if mod is not None else ""


def is_use(ref: Reference) -> bool:
    """A reference that needs the entity at run time (a function-local import counts)."""
    return not ref.is_test and (ref.kind in USE_KINDS or (ref.kind in ("import", "reexport")
                                                          and bool(ref.in_entity)))
