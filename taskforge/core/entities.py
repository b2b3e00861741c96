"""The static index of a repository's own code: entities and who references them (built with libcst)."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class EntityKind(enum.StrEnum):
    FUNCTION = "function"
    METHOD = "method"
    CLASS = "class"
    MODULE = "module"


@dataclass(frozen=True, slots=True)
class Reference:
    """A place that refers to an entity: ``kind`` is import | call | name | attribute | all | reexport | dynamic.

    ``dynamic`` marks an attribute use ``obj.name`` whose receiver could not be resolved statically; it is
    recorded on every method called ``name`` (a possible, not a certain, reference).
    """

    file: str  # workspace-relative path
    line: int
    kind: str
    in_entity: str  # qualified name of the enclosing entity ("" at module level)
    is_test: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "kind": self.kind, "in_entity": self.in_entity,
                "is_test": self.is_test}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Reference:
        return cls(d["file"], int(d["line"]), d["kind"], d.get("in_entity", ""), bool(d.get("is_test", False)))


class DefinitionRole(enum.StrEnum):
    """What another ``def`` of an entity's qualified name in the same scope is (``Entity.other_definitions``)."""

    OVERLOAD = "overload"  # ``@typing.overload`` declaration: a signature for type checkers, never run
    ACCESSOR = "accessor"  # ``@name.setter`` / ``@name.deleter``: another function of the same property
    ALTERNATE = "alternate"  # another implementation: an ``if``/``try`` branch, or an earlier def a later one replaces


@dataclass(frozen=True, slots=True)
class OtherDefinition:
    """One more ``def`` (or ``class``) of an entity's qualified name, in the same file and scope."""

    role: DefinitionRole
    start_line: int  # decorators included, as ``Entity.start_line``
    end_line: int
    body_start: int
    body_end: int

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role.value, "start_line": self.start_line, "end_line": self.end_line,
                "body_start": self.body_start, "body_end": self.body_end}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OtherDefinition:
        return cls(DefinitionRole(d["role"]), int(d["start_line"]), int(d["end_line"]), int(d["body_start"]),
                   int(d["body_end"]))


@dataclass(frozen=True, slots=True)
class Entity:
    """A function, method, class or module of the project's own (non-test) code."""

    qualname: str  # dotted: "pkg.mod.Class.method"; for modules "pkg.mod"
    kind: EntityKind
    file: str  # workspace-relative path of the defining file
    start_line: int  # first line of the definition (decorators included)
    end_line: int
    body_start: int  # first line of the body after the docstring (== start_line for modules)
    body_end: int
    signature: str = ""  # "def f(a, b=1) -> int" as written (no body)
    docstring: str = ""
    statements: int = 0  # statements in the body
    complexity: int = 1  # cyclomatic complexity of the body
    is_private: bool = False
    references: tuple[Reference, ...] = ()
    decorators: tuple[str, ...] = ()  # decorator expressions as written, without "@"
    # The spans above are the *implementation*: of several defs of one name in one scope, the last that is no
    # ``@overload`` declaration and no property setter/deleter (``generators.redefinitions``). The others are
    # here, so that an edit of the entity reaches each of them (the first ``@overload`` stub used to be the
    # entity, and stubbing it left the implementation in the agent's workspace: itsdangerous 2.2.0).
    other_definitions: tuple[OtherDefinition, ...] = ()

    @property
    def module(self) -> str:
        return self.qualname if self.kind is EntityKind.MODULE else self.qualname.rsplit(".", 1)[0]

    @property
    def alternates(self) -> tuple[OtherDefinition, ...]:
        """The other implementations (``DefinitionRole.ALTERNATE``): stubbed along with the entity."""
        return tuple(o for o in self.other_definitions if o.role is DefinitionRole.ALTERNATE)

    @property
    def body_spans(self) -> tuple[tuple[int, int], ...]:
        """``(body_start, body_end)`` of the implementation and of each alternate: the lines whose execution
        is the entity's behaviour (an ``if``/``else`` pair runs one branch, which one depends on the Python)."""
        return ((self.body_start, self.body_end), *((a.body_start, a.body_end) for a in self.alternates))

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """``(start_line, end_line)`` of every definition of the name, the implementation first."""
        return ((self.start_line, self.end_line), *((o.start_line, o.end_line) for o in self.other_definitions))

    def source_in(self, lines: Sequence[str]) -> str:
        """The entity's code among its file's ``lines`` (``keepends``), what the leak audit fingerprints: the
        implementation and its alternates, in file order. Not the ``@overload`` declarations (signatures, no
        code) nor a property's setter: a stub keeps them, and their lines left in the file would make it look
        like a copy of the deleted code (``taskforge.audit.fingerprints``)."""
        spans = [(self.start_line, self.end_line), *((a.start_line, a.end_line) for a in self.alternates)]
        return "".join("".join(lines[start - 1:end]) for start, end in sorted(spans))

    def to_dict(self) -> dict[str, Any]:
        return {
            "qualname": self.qualname, "kind": self.kind.value, "file": self.file,
            "start_line": self.start_line, "end_line": self.end_line,
            "body_start": self.body_start, "body_end": self.body_end,
            "signature": self.signature, "docstring": self.docstring,
            "statements": self.statements, "complexity": self.complexity,
            "is_private": self.is_private, "references": [r.to_dict() for r in self.references],
            "decorators": list(self.decorators),
            # only when there are some: one name, one def is nearly every entity, and the index is stored per profile
            **({"other_definitions": [o.to_dict() for o in self.other_definitions]}
               if self.other_definitions else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Entity:
        return cls(
            qualname=d["qualname"], kind=EntityKind(d["kind"]), file=d["file"],
            start_line=int(d["start_line"]), end_line=int(d["end_line"]),
            body_start=int(d["body_start"]), body_end=int(d["body_end"]),
            signature=d.get("signature", ""), docstring=d.get("docstring", ""),
            statements=int(d.get("statements", 0)), complexity=int(d.get("complexity", 1)),
            is_private=bool(d.get("is_private", False)),
            references=tuple(Reference.from_dict(r) for r in d.get("references", ())),
            decorators=tuple(d.get("decorators", ())),
            other_definitions=tuple(OtherDefinition.from_dict(o) for o in d.get("other_definitions", ())),
        )
