"""libcst edits shared by the deletion strategies; untouched code keeps its exact bytes.

``edit_file`` applies, in one transformer pass over one file: removal of definitions, body
replacement (stubs), removal of chosen import aliases (re-exports, imports of a removed module) and of
``__all__`` entries. ``drop_unused_imports`` then removes the imports that *the edit* made unused
(used before, unused after; names still mentioned in string literals are kept). ``dangling_names``
is the safety net: names the edit unbound that the remaining code still uses.
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from generators import cst_metrics
from generators.index_visitor import absolute_name
from taskforge.core import pyparse

_ImportNode = TypeVar("_ImportNode", cst.Import, cst.ImportFrom)

DefKey = tuple[str, int]  # (qualified name, first line incl. decorators)
BodyMaker = Callable[[cst.FunctionDef], cst.BaseSuite]


@dataclass(frozen=True, slots=True)
class FileEdit:
    module: str  # dotted module name of the file ("" when unknown)
    remove_defs: frozenset[DefKey] = frozenset()
    replace_bodies: Mapping[DefKey, BodyMaker] = field(default_factory=dict)
    remove_imports: Mapping[int, frozenset[str]] = field(default_factory=dict)  # line -> names ("*" = all)
    remove_all_names: frozenset[str] = frozenset()
    remove_import_modules: frozenset[str] = frozenset()  # absolute module names: drop every import of them
    is_package: bool = False  # the file is a package's __init__.py (for relative imports)
    remove_statement_lines: frozenset[int] = frozenset()  # module-level simple statements starting there


@dataclass(slots=True)
class EditResult:
    text: str
    removed_bindings: set[str]  # module-level names the edit unbound
    removed_nodes: list[cst.CSTNode]  # original nodes removed or replaced (for metrics)
    matched: set[DefKey]


def raise_not_implemented(fn: cst.FunctionDef) -> cst.BaseSuite:
    """The stub body: the docstring (if any) then ``raise NotImplementedError``."""
    stmt = cst.Raise(exc=cst.Name("NotImplementedError"))
    if isinstance(fn.body, cst.SimpleStatementSuite):
        return cst.SimpleStatementSuite(body=[stmt])
    body = fn.body
    assert isinstance(body, cst.IndentedBlock)
    doc = cst_metrics.docstring_statement(body)
    lines: list[cst.BaseStatement] = [doc] if doc is not None else []
    lines.append(cst.SimpleStatementLine(body=[stmt]))
    footer = [line for line in body.footer if line.comment is None]
    return body.with_changes(body=lines, footer=footer)


def _alias_binding(alias: cst.ImportAlias, from_import: bool) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    full = cst.helpers.get_full_name_for_node(alias.name) or ""
    return full if from_import else full.split(".", 1)[0]


class _Editor(cst.CSTTransformer):
    def __init__(self, edit: FileEdit, positions: Mapping[cst.CSTNode, CodeRange]) -> None:
        super().__init__()
        self.e = edit
        self.pos = positions
        self.lines = sorted({k[1] for k in edit.remove_defs} | {k[1] for k in edit.replace_bodies}
                            | set(edit.remove_imports))
        self.names: list[str] = []
        self.result_bindings: set[str] = set()
        self.removed: list[cst.CSTNode] = []
        self.matched: set[DefKey] = set()

    def _line(self, node: cst.CSTNode) -> int:
        return self.pos[node].start.line

    def _key(self, node: cst.FunctionDef | cst.ClassDef) -> DefKey:
        qual = ".".join([self.e.module, *self.names] if self.e.module else self.names)
        start = self._line(node.decorators[0]) if node.decorators else self._line(node)
        return qual, start

    def _visit_def(self, node: cst.FunctionDef | cst.ClassDef) -> bool:
        """Descend only into definitions that contain a line this edit is about (speed)."""
        self.names.append(node.name.value)
        start = self._line(node.decorators[0]) if node.decorators else self._line(node)
        end = self.pos[node].end.line
        at = bisect.bisect_left(self.lines, start)  # sorted: idna's hiding removes 6,300 tests from one file
        return at < len(self.lines) and self.lines[at] <= end

    def _leave_def(self, original: cst.FunctionDef | cst.ClassDef,
                   updated: cst.FunctionDef | cst.ClassDef) -> cst.BaseStatement | cst.RemovalSentinel:
        key = self._key(original)
        self.names.pop()
        if key in self.e.remove_defs:
            self.matched.add(key)
            self.removed.append(original)
            if not self.names:  # a module-level name is no longer bound
                self.result_bindings.add(original.name.value)
            return cst.RemovalSentinel.REMOVE
        maker = self.e.replace_bodies.get(key)
        if maker is not None and isinstance(updated, cst.FunctionDef):
            self.matched.add(key)
            self.removed.append(original)
            return updated.with_changes(body=maker(updated))
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return self._visit_def(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
                          ) -> cst.BaseStatement | cst.RemovalSentinel:
        return self._leave_def(original_node, updated_node)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return self._visit_def(node)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef
                       ) -> cst.BaseStatement | cst.RemovalSentinel:
        return self._leave_def(original_node, updated_node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
                            ) -> cst.IndentedBlock:
        if not updated_node.body:  # everything in it was removed: keep the block valid
            return updated_node.with_changes(body=[cst.SimpleStatementLine(body=[cst.Pass()])])
        return updated_node

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine
                                  ) -> cst.BaseStatement | cst.RemovalSentinel:
        if self.e.remove_statement_lines and not self.names \
                and self._line(original_node) in self.e.remove_statement_lines:
            self.removed.append(original_node)
            return cst.RemovalSentinel.REMOVE
        return updated_node

    # -- imports --------------------------------------------------------------------------------
    def _wanted(self, node: cst.Import | cst.ImportFrom) -> frozenset[str] | None:
        return self.e.remove_imports.get(self._line(node))

    def _gone_module(self, name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in self.e.remove_import_modules)

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import
                     ) -> cst.Import | cst.RemovalSentinel:
        wanted = set(self._wanted(original_node) or ())
        if self.e.remove_import_modules and not self.names:
            wanted |= {full for a in updated_node.names
                       if self._gone_module(full := cst.helpers.get_full_name_for_node(a.name) or "")}
        if not wanted:
            return updated_node
        return self._filter(updated_node, frozenset(wanted), from_import=False)  # type: ignore[return-value]

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
                         ) -> cst.ImportFrom | cst.RemovalSentinel:
        wanted = self._wanted(original_node)
        if self.e.remove_import_modules and not self.names:
            mod = cst.helpers.get_full_name_for_node(updated_node.module) if updated_node.module else ""
            absolute = absolute_name("." * len(updated_node.relative) + (mod or ""), self.e.module,
                                     self.e.is_package)
            if self._gone_module(absolute):
                wanted = frozenset({"*"})
        if not wanted:
            return updated_node
        if "*" in wanted or isinstance(updated_node.names, cst.ImportStar):
            if not isinstance(updated_node.names, cst.ImportStar):
                self.result_bindings.update(_alias_binding(a, True) for a in updated_node.names)
            self.removed.append(original_node)
            return cst.RemovalSentinel.REMOVE
        return self._filter(updated_node, wanted, from_import=True)  # type: ignore[return-value]

    def _filter(self, node: cst.Import | cst.ImportFrom, wanted: frozenset[str], from_import: bool
                ) -> cst.Import | cst.ImportFrom | cst.RemovalSentinel:
        assert not isinstance(node.names, cst.ImportStar)
        keep: list[cst.ImportAlias] = []
        dropped: list[cst.ImportAlias] = []
        for alias in node.names:
            full = cst.helpers.get_full_name_for_node(alias.name) or ""
            (dropped if full in wanted else keep).append(alias)
        if not dropped:
            return node
        self.removed.append(node)
        self.result_bindings.update(_alias_binding(a, from_import) for a in dropped)
        if not keep:
            return cst.RemovalSentinel.REMOVE
        return node.with_changes(names=_fix_commas(node.names, keep))

    # -- __all__ ----------------------------------------------------------------------------------
    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if self.names or not self.e.remove_all_names:
            return updated_node
        if any(isinstance(t.target, cst.Name) and t.target.value == "__all__" for t in updated_node.targets):
            return updated_node.with_changes(value=self._strip_all(updated_node.value))
        return updated_node

    def leave_AugAssign(self, original_node: cst.AugAssign, updated_node: cst.AugAssign) -> cst.AugAssign:
        if not self.names and isinstance(updated_node.target, cst.Name) and updated_node.target.value == "__all__":
            return updated_node.with_changes(value=self._strip_all(updated_node.value))
        return updated_node

    def _strip_all(self, value: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            elements = list(value.elements)
            keep = [el for el in elements if not (isinstance(el.value, cst.SimpleString)
                                                  and el.value.evaluated_value in self.e.remove_all_names)]
            if len(keep) == len(elements):
                return value
            if isinstance(value, cst.Tuple) and len(keep) == 1 and not value.lpar:
                return value  # unparenthesized one-tuple edge case: leave as is
            return value.with_changes(elements=_fix_commas(elements, keep))
        if isinstance(value, cst.BinaryOperation):
            return value.with_changes(left=self._strip_all(value.left), right=self._strip_all(value.right))
        return value


def _fix_commas(original: object, keep: list) -> list:  # type: ignore[type-arg]
    """Keep the original trailing-comma style when the last element of a sequence was dropped."""
    seq = list(original)  # type: ignore[call-overload]
    if not keep or keep[-1] is seq[-1]:
        return keep
    last = keep[-1].with_changes(comma=seq[-1].comma)
    return [*keep[:-1], last]


@functools.lru_cache(maxsize=32)
def parsed(text: str) -> tuple[cst.Module, Mapping[cst.CSTNode, CodeRange]]:
    """Parse once per file text: strategies edit the same original files again and again.

    libcst trees are immutable and transformers never change the original nodes, so sharing is safe.
    """
    tree = cst.parse_module(text)
    return tree, MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)


def edit_file(text: str, edit: FileEdit) -> EditResult:
    tree, positions = parsed(text)
    editor = _Editor(edit, positions)
    new = tree.visit(editor)
    return EditResult(new.code, editor.result_bindings, editor.removed, editor.matched)


# ---------------------------------------------------------------------------------------------------
# names: used, bound, dangling
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NameSummary:
    """Names of a module: ``used`` (loaded anywhere), ``strings``, ``bound`` (defs, assignments, imports),
    ``imported`` (import bindings outside functions). Computed with the stdlib ``ast`` (read-only
    analysis; it is an order of magnitude faster than a libcst visit and edits stay with libcst)."""

    used: frozenset[str]
    strings: tuple[str, ...]
    bound: frozenset[str]
    imported: frozenset[str]


def _import_bindings(node: ast.Import | ast.ImportFrom) -> set[str]:
    out = set()
    for a in node.names:
        if a.name == "*":
            continue
        if a.asname:
            out.add(a.asname)
        elif isinstance(node, ast.Import):
            out.add(a.name.split(".", 1)[0])
        else:
            out.add(a.name)
    return out


def _summary(text: str) -> NameSummary:
    tree = pyparse.parse(text)
    used: set[str] = set()
    strings: list[str] = []
    bound: set[str] = set()
    imported: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_function = stack.pop()
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else used).add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.append(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = _import_bindings(node)
            bound |= names
            if not in_function:
                imported |= names
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return NameSummary(frozenset(used), tuple(strings), frozenset(bound), frozenset(imported))


@functools.lru_cache(maxsize=32)
def _summary_of_text(text: str) -> NameSummary:
    return _summary(text)


def _mentioned_in_strings(name: str, strings: tuple[str, ...]) -> bool:
    pat = re.compile(rf"\b{re.escape(name)}\b")
    return any(pat.search(s) for s in strings)


class _DropImports(cst.CSTTransformer):
    def __init__(self, dead: set[str]) -> None:
        super().__init__()
        self.dead = dead

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # function-local imports belong to code the edit did not touch

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import
                     ) -> cst.Import | cst.RemovalSentinel:
        return self._without_dead(updated_node, from_import=False)

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
                         ) -> cst.ImportFrom | cst.RemovalSentinel:
        if isinstance(updated_node.names, cst.ImportStar) or updated_node.module is not None and \
                cst.helpers.get_full_name_for_node(updated_node.module) == "__future__":
            return updated_node
        return self._without_dead(updated_node, from_import=True)

    def _without_dead(self, node: _ImportNode, from_import: bool) -> _ImportNode | cst.RemovalSentinel:
        """``node`` (an import) without its dead names; removed when none is left."""
        assert not isinstance(node.names, cst.ImportStar)  # ``leave_ImportFrom`` keeps those as they are
        keep = [a for a in node.names if _alias_binding(a, from_import) not in self.dead]
        if len(keep) == len(node.names):
            return node
        return cst.RemovalSentinel.REMOVE if not keep else node.with_changes(names=_fix_commas(node.names, keep))

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
                            ) -> cst.IndentedBlock:
        if not updated_node.body:
            return updated_node.with_changes(body=[cst.SimpleStatementLine(body=[cst.Pass()])])
        return updated_node


@dataclass(frozen=True, slots=True)
class Finalized:
    text: str
    dropped: frozenset[str]  # imports removed because the edit made them unused
    dangling: tuple[str, ...]  # unbound names the remaining code still uses


def finalize(before: str, edited: str, unbound: set[str] = frozenset()) -> Finalized:  # type: ignore[assignment]
    """Drop the imports ``edited`` no longer uses but ``before`` did; report names left dangling.

    A file in a newer Python's syntax than the running one (typeguard 4.6.1's ``type Foo = list[int]`` test
    module: libcst reads it, ``ast`` under 3.11 does not, and it never collects here) is left as edited."""
    try:
        old = _summary_of_text(before)
        new = _summary(edited)
    except SyntaxError:
        return Finalized(edited, frozenset(), ())
    dead = {b for b in new.imported if b in old.used and b not in new.used
            and not _mentioned_in_strings(b, new.strings)}
    text = cst.parse_module(edited).visit(_DropImports(dead)).code if dead else edited
    dangling = tuple(sorted(n for n in unbound if n in new.used and n not in new.bound))
    return Finalized(text, frozenset(dead), dangling)


def drop_unused_imports(before: str, after: str) -> tuple[str, set[str]]:
    """Remove module-level imports that ``after`` no longer uses but ``before`` did."""
    f = finalize(before, after)
    return f.text, set(f.dropped)


def dangling_names(text: str, unbound: set[str]) -> list[str]:
    """Names in ``unbound`` that ``text`` still uses without binding them anywhere."""
    names = _summary(text)
    return sorted(n for n in unbound if n in names.used and n not in names.bound)
