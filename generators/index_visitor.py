"""Phase 1 of the static index: what one file defines and the raw references it makes (libcst).

``index_file(text, rel, module, is_test)`` parses one file with ``MetadataWrapper`` and returns its
``FileFacts``: entity drafts (non-test files only), module-level import aliases, class bases, and raw
references whose candidate names are absolute dotted names (relative imports resolved against
``module``). ``generators/static_index.py`` resolves them across files.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import (
    MetadataWrapper,
    PositionProvider,
    QualifiedName,
    QualifiedNameSource,
    ScopeProvider,
)

from generators import cst_metrics
from generators.literal_mask import mask_constant_literals
from taskforge.core.entities import Entity, EntityKind


@dataclass(frozen=True, slots=True)
class RawRef:
    file: str
    line: int
    kind: str  # import | call | name | attribute | all | reexport
    in_entity: str
    is_test: bool
    candidates: tuple[str, ...] = ()  # absolute dotted names, most specific first
    self_class: str = ""  # "self.attr"/"cls.attr" inside this class: look attr up along its bases
    attr: str = ""  # the attribute name, for the dynamic fallback
    local_root: bool = False  # the receiver is local code (not an external import)

    def dynamic_ok(self, top_level: set[str]) -> bool:
        """An unresolved attribute may be a use of a project method only when its receiver is not external."""
        if self.kind not in ("attribute", "call") or not self.attr:
            return False
        if self.local_root or not self.candidates:
            return True
        return any(c.split(".", 1)[0] in top_level for c in self.candidates)


@dataclass(slots=True)
class FileFacts:
    file: str
    module: str
    is_test: bool
    entities: list[Entity] = field(default_factory=list)
    refs: list[RawRef] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # "pkg.name" -> "pkg.mod.name"
    class_bases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    star_imports: list[str] = field(default_factory=list)  # modules this file does ``from M import *`` of


def index_file(text: str, rel: str, module: str, is_test: bool) -> FileFacts | str:
    """Facts of one file, or the parse error message."""
    try:
        tree = cst.parse_module(mask_constant_literals(text))  # data tables: nothing to index inside
    except cst.ParserSyntaxError as exc:
        return f"libcst cannot parse it ({str(exc).splitlines()[0]})"
    facts = FileFacts(rel, module, is_test)
    visitor = _Visitor(facts, is_package=rel.endswith("__init__.py"), n_lines=_line_count(text))
    MetadataWrapper(tree, unsafe_skip_copy=True).visit(visitor)
    return facts


def absolute_name(name: str, module: str, is_package: bool) -> str:
    """Resolve a relative dotted name (``.mod.f``, ``..pkg``) against ``module``."""
    dots = len(name) - len(name.lstrip("."))
    if dots == 0:
        return name
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if dots > 1:
        parts = parts[: len(parts) - (dots - 1)] if len(parts) >= dots - 1 else []
    rest = name[dots:]
    return ".".join([*parts, rest] if rest else parts)


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either order)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s.value for s in sides if isinstance(s, cst.Name)]
    strings = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]


def _line_count(text: str) -> int:
    return max(1, text.count("\n") + (0 if text.endswith("\n") else 1))


@dataclass(slots=True)
class _Frame:
    qualname: str  # entity qualname, or "" for an unindexed scope (function-local def/class)
    kind: EntityKind | None
    class_qualname: str = ""  # for methods: their class


class _Visitor(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider)

    def __init__(self, facts: FileFacts, is_package: bool, n_lines: int) -> None:
        super().__init__()
        self.f = facts
        self.is_package = is_package
        self.n_lines = n_lines
        self.stack: list[_Frame] = []
        self.skip: set[int] = set()
        self.calls: set[int] = set()
        self.main_guard = 0  # inside ``if __name__ == "__main__":`` at module level

    # -- helpers ------------------------------------------------------------------------------------
    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _in_entity(self) -> str:
        return next((fr.qualname for fr in reversed(self.stack) if fr.qualname), "")

    def _absolute(self, name: str) -> str:
        return absolute_name(name, self.f.module, self.is_package)

    def _ref(self, node: cst.CSTNode, kind: str, candidates: tuple[str, ...], **kw: object) -> None:
        self.f.refs.append(RawRef(self.f.file, self._line(node), kind, self._in_entity(), self.f.is_test,
                                  candidates, **kw))  # type: ignore[arg-type]

    def _names(self, node: cst.CSTNode) -> Collection[QualifiedName]:
        """libcst's ``QualifiedNameProvider`` value of ``node``, computed for the nodes asked about only: the
        provider computes it for every node of the file (whitespace and commas included), 11 of the 45 CPU-s
        the index took on idna 3.20's 1.4 MB test file."""
        scope = self.get_metadata(ScopeProvider, node, None)
        return scope.get_qualified_names_for(node) if scope is not None else set()

    def _qualified(self, node: cst.CSTNode) -> tuple[tuple[str, ...], bool]:
        """Absolute candidate names of ``node`` and whether its root is local code (not an import)."""
        out: list[str] = []
        local = False
        # by name, then source: a name both imported and bound here (``try: import x`` / ``except: x = None``)
        # has two, whose order in the set followed the process's string hashes
        for q in sorted(self._names(node), key=lambda q: (q.name, q.source.name)):
            if q.source is QualifiedNameSource.BUILTIN:
                continue
            if "<locals>" in q.name:
                local = True
                continue
            if q.source is QualifiedNameSource.IMPORT:
                out.append(self._absolute(q.name))
            else:
                local = True
                out.append(f"{self.f.module}.{q.name}" if self.f.module else q.name)
        return tuple(out), local

    def _bound(self, node: cst.Name) -> bool:
        """Whether ``node`` is a builtin or a name the file binds (a qualified name is known for it)."""
        import builtins

        return hasattr(builtins, node.value) or bool(self._names(node))

    def _entity_frame(self, node: cst.FunctionDef | cst.ClassDef) -> _Frame:
        parent = self.stack[-1] if self.stack else None
        name = node.name.value
        if parent is not None and (parent.qualname == "" or parent.kind in (EntityKind.FUNCTION,
                                                                            EntityKind.METHOD)):
            return _Frame("", None)  # defined inside a function: part of that function, not an entity
        prefix = parent.qualname if parent is not None else self.f.module
        qual = f"{prefix}.{name}" if prefix else name
        if isinstance(node, cst.ClassDef):
            return _Frame(qual, EntityKind.CLASS)
        if parent is not None and parent.kind is EntityKind.CLASS:
            return _Frame(qual, EntityKind.METHOD, parent.qualname)
        return _Frame(qual, EntityKind.FUNCTION)

    def _add_entity(self, frame: _Frame, node: cst.FunctionDef | cst.ClassDef | cst.Module) -> None:
        if self.f.is_test or frame.kind is None:
            return
        statements, complexity = cst_metrics.measure(node)
        body = cst_metrics.body_statements(node)
        if isinstance(node, cst.Module):
            start, end = 1, self.n_lines
            body_start, body_end = start, end
            sig, decos = "", tuple[str, ...]()
        else:
            pos = self.get_metadata(PositionProvider, node)
            start = self._line(node.decorators[0]) if node.decorators else pos.start.line
            end = pos.end.line
            if body:
                body_start = self._line(body[0])
                body_end = self.get_metadata(PositionProvider, body[-1]).end.line
            else:  # only a docstring: an empty body range
                body_end = end
                body_start = end + 1
            sig, decos = cst_metrics.signature(node), cst_metrics.decorators(node)
        short = frame.qualname.rsplit(".", 1)[-1]
        private = short.startswith("_") and not (short.startswith("__") and short.endswith("__"))
        self.f.entities.append(Entity(
            qualname=frame.qualname, kind=frame.kind, file=self.f.file, start_line=start, end_line=end,
            body_start=body_start, body_end=body_end, signature=sig, docstring=cst_metrics.docstring(node),
            statements=statements, complexity=complexity, is_private=private, decorators=decos,
        ))

    # -- definitions ------------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        if self.f.module:
            self._add_entity(_Frame(self.f.module, EntityKind.MODULE), node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self._entity_frame(node)
        self._add_entity(frame, node)
        self.stack.append(frame)
        self.skip.add(id(node.name))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        frame = self._entity_frame(node)
        self._add_entity(frame, node)
        if frame.kind is EntityKind.CLASS and not self.f.is_test:
            bases: list[str] = []
            for arg in node.bases:
                cands, _ = self._qualified(arg.value)
                bases.extend(cands)
            self.f.class_bases[frame.qualname] = tuple(bases)
        self.stack.append(frame)
        self.skip.add(id(node.name))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.stack.pop()

    def visit_Param(self, node: cst.Param) -> None:
        self.skip.add(id(node.name))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    # -- imports ----------------------------------------------------------------------------------
    def _import_kind(self) -> str:
        return "reexport" if self.is_package and not self.f.is_test and not self.stack else "import"

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            name = cst.helpers.get_full_name_for_node(alias.name) or ""
            self._ref(node, "import", (name,))
            if alias.asname is not None and not self.stack and isinstance(alias.asname.name, cst.Name):
                self.f.aliases[f"{self.f.module}.{alias.asname.name.value}"] = name
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        dots = "." * len(node.relative)
        mod = cst.helpers.get_full_name_for_node(node.module) if node.module is not None else ""
        base = self._absolute(dots + (mod or ""))
        kind = self._import_kind()
        if node.module is not None and base:
            self._ref(node, kind, (base,))
        if isinstance(node.names, cst.ImportStar):
            if base and not self.stack:  # its names resolve through ``base`` (static_index: star chains)
                self.f.star_imports.append(base)
            return False
        for alias in node.names:
            name = cst.helpers.get_full_name_for_node(alias.name) or ""
            target = f"{base}.{name}" if base else name
            self._ref(node, kind, (target,))
            local = alias.asname.name.value if alias.asname is not None and isinstance(
                alias.asname.name, cst.Name) else name
            if not self.stack and not self.f.is_test and self.f.module:
                self.f.aliases[f"{self.f.module}.{local}"] = target
        return False

    # -- uses -------------------------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        if not self.stack and _is_main_guard(node.test):
            self.main_guard += 1

    def leave_If(self, original_node: cst.If) -> None:
        if not self.stack and _is_main_guard(original_node.test):
            self.main_guard -= 1

    def visit_Call(self, node: cst.Call) -> None:
        # a call under the main guard does not run when the module is imported: recorded as a plain use
        if not self.main_guard:
            self.calls.add(id(node.func))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self.skip:
            return
        cands, _ = self._qualified(node)
        if not cands and self.f.star_imports and not self._bound(node):
            # a name no assignment or import binds, in a file with ``from M import *``: one of those M's
            cands = tuple(f"{m}.{node.value}" for m in reversed(self.f.star_imports))
        if cands:
            self._ref(node, "call" if id(node) in self.calls else "name", cands)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.attr))
        kind = "call" if id(node) in self.calls else "attribute"
        attr = node.attr.value
        cls = next((fr.class_qualname for fr in reversed(self.stack) if fr.kind is not None), "")
        if isinstance(node.value, cst.Name) and node.value.value in ("self", "cls") and cls:
            self._ref(node, kind, (), self_class=cls, attr=attr)
            return
        if (isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name)
                and node.value.func.value == "super" and cls):
            self._ref(node, kind, (), self_class=cls, attr=attr)
            return
        cands, local = self._qualified(node)
        if not cands:
            root, root_local = self._qualified(node.value) if isinstance(node.value, (cst.Name,
                                                                                       cst.Attribute)) else ((), True)
            local = root_local or not root
        self._ref(node, kind, cands, attr=attr, local_root=local)

    # -- __all__ ----------------------------------------------------------------------------------
    def _all_strings(self, value: cst.BaseExpression) -> list[tuple[cst.CSTNode, str]]:
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            out: list[tuple[cst.CSTNode, str]] = []
            for el in value.elements:
                if isinstance(el.value, cst.SimpleString):
                    s = el.value.evaluated_value
                    if isinstance(s, str):
                        out.append((el.value, s))
            return out
        if isinstance(value, cst.BinaryOperation):
            return self._all_strings(value.left) + self._all_strings(value.right)
        return []

    def _record_all(self, value: cst.BaseExpression | None) -> None:
        if value is None or self.f.is_test:
            return
        for node, name in self._all_strings(value):
            self._ref(node, "all", (f"{self.f.module}.{name}" if self.f.module else name,))

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.stack and any(isinstance(t.target, cst.Name) and t.target.value == "__all__"
                                  for t in node.targets):
            self._record_all(node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if not self.stack and isinstance(node.target, cst.Name) and node.target.value == "__all__":
            self._record_all(node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if not self.stack and isinstance(node.target, cst.Name) and node.target.value == "__all__":
            self._record_all(node.value)
