"""One entity per qualified name when a scope defines the name several times (``@overload``, setters, branches).

``index_file`` emits one entity draft per ``def``/``class``; a name defined several times in one scope
gives several drafts with one qualified name:

- ``@typing.overload`` declarations (also ``@t.overload``, ``@typing_extensions.overload``, ``@overload``)
  followed by the implementation;
- a property's getter, then ``@name.setter`` / ``@name.deleter`` functions of the same attribute;
- alternative implementations: ``if sys.version_info >= ...: def f ... else: def f``, a ``try``/``except``
  fallback, ``if TYPE_CHECKING: def f(...) -> T: ...  else: def f``, or a plain redefinition.

The entity is the implementation: the *last* definition that is neither an overload declaration nor an
accessor (Python binds the name to the last ``def`` that runs; an ``@overload`` declaration is never
called, and an accessor belongs to the getter). The rest is kept on the entity as
``Entity.other_definitions`` with their role, so that the strategies edit every definition that holds
code of the entity: a stub stubs the alternates too, a deletion removes every definition
(``generators.deletion_build.stub_keys`` / ``removal_keys``). Before this, the first draft won: for an
overloaded name that is the first ``@overload`` stub, and the stub strategy "stubbed" it while the
implementation stayed in the agent's workspace (itsdangerous 2.2.0 ``TimestampSigner.unsign``).

When every definition is an overload declaration or an accessor (a ``Protocol`` declaring overloads only),
the first one is the entity, as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from taskforge.core.definitions import role_of
from taskforge.core.entities import DefinitionRole, Entity, OtherDefinition


def merge_definitions(drafts: Iterable[Entity]) -> dict[str, Entity]:
    """qualname -> its entity, from the drafts in file order (first file of a qualname wins, as before)."""
    groups: dict[str, list[Entity]] = {}
    for e in drafts:
        group = groups.setdefault(e.qualname, [])
        # two files of one module name (``pkg/m.py`` and ``pkg/m/__init__.py``): only the first file's defs;
        # one scope's redefinitions are always in one file
        if not group or group[0].file == e.file:
            group.append(e)
    return {q: merge(group) for q, group in groups.items()}


def merge(group: list[Entity]) -> Entity:
    """The implementation of ``group`` (the drafts of one qualname in one file), the others attached."""
    if len(group) == 1:
        return group[0]
    roles = [role_of(e.qualname.rsplit(".", 1)[-1], e.decorators) for e in group]
    implementations = [i for i, r in enumerate(roles) if r is DefinitionRole.ALTERNATE]
    primary = implementations[-1] if implementations else 0
    others = tuple(OtherDefinition(roles[i], e.start_line, e.end_line, e.body_start, e.body_end)
                   for i, e in enumerate(group) if i != primary)
    return replace(group[primary], other_definitions=others)
