"""The static index of a repository's own code: entities and who references them (built with libcst)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
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

    @property
    def module(self) -> str:
        return self.qualname if self.kind is EntityKind.MODULE else self.qualname.rsplit(".", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "qualname": self.qualname, "kind": self.kind.value, "file": self.file,
            "start_line": self.start_line, "end_line": self.end_line,
            "body_start": self.body_start, "body_end": self.body_end,
            "signature": self.signature, "docstring": self.docstring,
            "statements": self.statements, "complexity": self.complexity,
            "is_private": self.is_private, "references": [r.to_dict() for r in self.references],
            "decorators": list(self.decorators),
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
        )
