"""Measures of a libcst node: statement count, cyclomatic complexity, signature text, docstring.

Shared by the static index (``generators/static_index.py``) and the deletion codemods, so the numbers
an entity carries in the index and the numbers a ``Deletion`` reports are computed the same way.
"""

from __future__ import annotations

import libcst as cst

_EMPTY_MODULE = cst.parse_module("")

# Compound statements count as one statement each (their bodies are counted too).
_COMPOUND = (cst.If, cst.For, cst.While, cst.Try, cst.TryStar, cst.With, cst.FunctionDef, cst.ClassDef,
             cst.Match)


class _Counter(cst.CSTVisitor):
    def __init__(self) -> None:
        self.statements = 0
        self.decisions = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.BaseSmallStatement) or isinstance(node, _COMPOUND):
            self.statements += 1
        # Decision points of McCabe's cyclomatic complexity (elif is an If in the orelse).
        if isinstance(node, (cst.If, cst.For, cst.While, cst.IfExp, cst.ExceptHandler, cst.ExceptStarHandler,
                             cst.MatchCase, cst.Assert)):
            self.decisions += 1
        elif isinstance(node, cst.CompFor):
            self.decisions += 1 + len(node.ifs)
        elif isinstance(node, cst.BooleanOperation):
            self.decisions += 1
        return True


def docstring_statement(body: cst.BaseSuite | cst.Module) -> cst.BaseStatement | None:
    """The statement holding the docstring of a module/class/function body, if any."""
    stmts = body.body if isinstance(body, cst.Module) else body.body
    if not stmts:
        return None
    first = stmts[0]
    if isinstance(first, cst.SimpleStatementLine) and len(first.body) == 1:
        expr = first.body[0]
        if isinstance(expr, cst.Expr) and isinstance(expr.value, (cst.SimpleString, cst.ConcatenatedString)):
            return first
    if isinstance(body, cst.SimpleStatementSuite) and isinstance(first, cst.Expr) and isinstance(
            first.value, (cst.SimpleString, cst.ConcatenatedString)):
        return None  # one-line suite "def f(): 'doc'": treat as a body, not a docstring
    return None


def body_statements(node: cst.FunctionDef | cst.ClassDef | cst.Module) -> list[cst.CSTNode]:
    """Top-level statements of the body, the docstring excluded."""
    if isinstance(node, cst.Module):
        stmts: list[cst.CSTNode] = list(node.body)
        doc = docstring_statement(node)
    else:
        stmts = list(node.body.body)
        doc = docstring_statement(node.body) if isinstance(node.body, cst.IndentedBlock) else None
    return [s for s in stmts if s is not doc]


def measure(node: cst.FunctionDef | cst.ClassDef | cst.Module) -> tuple[int, int]:
    """``(statements, cyclomatic complexity)`` of the body, docstring excluded."""
    counter = _Counter()
    for stmt in body_statements(node):
        stmt.visit(counter)
    return counter.statements, 1 + counter.decisions


def signature(node: cst.FunctionDef | cst.ClassDef) -> str:
    """``def f(a, b=1) -> int`` / ``class C(Base)`` as written, without decorators or body."""
    stub = node.with_changes(
        body=cst.SimpleStatementSuite(body=[cst.Expr(cst.Ellipsis())]),
        decorators=(),
        leading_lines=(),
        lines_after_decorators=(),
    )
    text = _EMPTY_MODULE.code_for_node(stub).strip()
    if text.endswith("..."):
        text = text[: -len("...")].rstrip()
    if text.endswith(":"):
        text = text[:-1].rstrip()
    return text


def decorators(node: cst.FunctionDef | cst.ClassDef) -> tuple[str, ...]:
    """Decorator expressions as written, without the ``@``."""
    return tuple(_EMPTY_MODULE.code_for_node(d.decorator) for d in node.decorators)


def docstring(node: cst.FunctionDef | cst.ClassDef | cst.Module) -> str:
    try:
        return node.get_docstring(clean=True) or ""
    except Exception:  # libcst raises on exotic string prefixes; a missing docstring is the honest answer
        return ""


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        name = cst.helpers.get_full_name_for_node(node.func)
        if name:
            self.names.add(name)


def called_names(nodes: list[cst.CSTNode]) -> set[str]:
    """Distinct dotted names called anywhere in ``nodes`` (``f``, ``self.g``, ``re.sub``)."""
    v = _Calls()
    for node in nodes:
        node.visit(v)
    return v.names
