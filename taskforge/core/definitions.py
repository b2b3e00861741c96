"""Every ``def``/``class`` of a module by its dotted path, and whether its body holds code (stdlib ``ast``).

The static index (libcst) decides which definition of a name is the entity; this module is the
independent second look: it finds *every* definition of a name in a module's source, however the index
chose, and says which still hold code. The leak audit uses it on the agent's workspace
(``taskforge.audit.live_defs``: a stubbed or deleted entity must have no definition left that holds code),
and the stub strategy uses it to tell a declaration (``...``) from an implementation.

Definitions are found where the index finds entities: at module level and in class bodies, including
inside ``if``/``try``/``with``/``for`` blocks there, never inside a function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from taskforge.core.entities import DefinitionRole

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True, slots=True)
class Definition:
    path: tuple[str, ...]  # names from the module down: ("Signer", "sign")
    start_line: int  # first line, decorators included
    end_line: int
    is_class: bool
    decorators: tuple[str, ...]  # decorator expressions (``ast.unparse``), without "@"
    holds_code: bool  # anything beyond a docstring and ``...`` / ``pass`` / ``raise NotImplementedError``

    @property
    def role(self) -> DefinitionRole:
        return role_of(self.path[-1], self.decorators)


def role_of(name: str, decorators: Iterable[str]) -> DefinitionRole:
    """What a definition of ``name`` with ``decorators`` (expressions as written) is, when the name has several:
    an ``@overload`` declaration (``typing``, ``t``, ``typing_extensions`` alike), a property's ``@name.setter``
    / ``@name.deleter``, or else an implementation (``ALTERNATE``). The static index and the audit both ask here."""
    for d in decorators:
        if d == "overload" or d.endswith(".overload"):
            return DefinitionRole.OVERLOAD
        if d in (f"{name}.setter", f"{name}.deleter"):
            return DefinitionRole.ACCESSOR
    return DefinitionRole.ALTERNATE


def implementations(found: Sequence[Definition]) -> list[Definition]:
    """Of the definitions of one name, those that implement it (no ``@overload`` declaration, no setter or
    deleter); all of them when none does (a ``Protocol`` that only declares overloads)."""
    return [d for d in found if d.role is DefinitionRole.ALTERNATE] or list(found)


def definitions(tree: ast.Module) -> list[Definition]:
    """Every function and class definition of ``tree`` outside function bodies, in file order."""
    return sorted(_walk(tree.body, ()), key=lambda d: d.start_line)


def named(tree: ast.Module, path: Sequence[str]) -> list[Definition]:
    """The definitions of ``tree`` at ``path`` (``("Cls", "meth")``): several when the name is redefined."""
    want = tuple(path)
    return [d for d in definitions(tree) if d.path == want]


def holds_code(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    """Whether ``node``'s body is more than a docstring and placeholder statements (``...``, ``pass``,
    ``raise NotImplementedError``): an ``@overload`` declaration and a stub hold none."""
    return any(not _placeholder(s) for s in node.body)


def _placeholder(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
            and (stmt.value.value is Ellipsis or isinstance(stmt.value.value, str)):
        return True  # ``...`` or a docstring (or a bare string: documentation, never behaviour)
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def _walk(body: list[ast.stmt], prefix: tuple[str, ...]) -> Iterator[Definition]:
    for node in body:
        if isinstance(node, (*_FUNCS, ast.ClassDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield Definition((*prefix, node.name), start, node.end_lineno or node.lineno,
                             isinstance(node, ast.ClassDef), tuple(ast.unparse(d) for d in node.decorator_list),
                             holds_code(node))
            if isinstance(node, ast.ClassDef):
                yield from _walk(node.body, (*prefix, node.name))
            continue
        for child in ast.iter_child_nodes(node):  # if/try/with/for/while/match blocks of this scope
            if isinstance(child, ast.stmt):
                yield from _walk([child], prefix)
            elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                yield from _walk(child.body, prefix)
