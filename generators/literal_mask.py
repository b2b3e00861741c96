"""Blank out large constant-only literals before the static index parses a file with libcst.

Generated data modules are common in real packages (idna's ``uts46data.py``: 17,000 lines of tuples of
ints and strings; unicode, locale and lexer tables elsewhere). libcst's scope and qualified-name metadata
visit every one of their nodes: indexing idna took 40 CPU-seconds, all but a few in that one file, and more
than the three baseline runs of its suite. A literal made only of constants (numbers, strings, bytes,
``None``/``True``/``False``, ``...``, signs, and lists/tuples/sets/dicts of them) holds no reference and no
definition, so the index learns nothing from its inside.

``mask_constant_literals(text)`` replaces each outermost such literal with at least ``MIN_LEAVES`` constants
by its opening bracket, the same number of newlines and its closing bracket. Every line keeps its number,
so the entities' line ranges, the references' lines and the statement counts stay what they were; only
columns after a masked literal on its last line move. A file ``ast`` cannot parse, or one with nothing
to mask, comes back unchanged (libcst then reports the parse error itself).
"""

from __future__ import annotations

import ast

from taskforge.core import pyparse

MIN_LEAVES = 64  # smaller literals are cheap to visit; masking them buys nothing
MIN_CHARS = 20_000  # files shorter than this are not worth an extra ``ast`` parse

_CONTAINERS = (ast.List, ast.Tuple, ast.Set, ast.Dict)
_BRACKETS = {ast.List: ("[", "]"), ast.Tuple: ("(", ")"), ast.Set: ("{", "}"), ast.Dict: ("{", "}")}


def mask_constant_literals(text: str) -> str:
    """``text`` with its large constant-only literals blanked (module docstring); unchanged when none."""
    if len(text) < MIN_CHARS:
        return text
    try:
        tree = pyparse.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return text
    spans: list[tuple[int, int, int, int, type]] = []
    _collect(tree, spans)
    if not spans:
        return text
    # ast counts lines at \n, \r\n and \r only (str.splitlines would also split at form feeds) and
    # gives columns as UTF-8 byte offsets: work on bytes
    raw = text.encode("utf-8").splitlines(keepends=True)
    for l0, c0, l1, c1, kind in sorted(spans, reverse=True):  # from the end: earlier offsets stay valid
        head, tail = raw[l0 - 1][:c0], raw[l1 - 1][c1:]
        opening, closing = _BRACKETS[kind]
        blank = (opening + "\n" * (l1 - l0) + closing).encode()
        raw[l0 - 1: l1] = (head + blank + tail).splitlines(keepends=True) or [b""]
    return b"".join(raw).decode("utf-8")


def _collect(node: ast.AST, spans: list[tuple[int, int, int, int, type]]) -> None:
    """Iterative: a 1,000-deep expression (asttokens 3.0.2's test data) overflowed the recursive walk."""
    stack = [node]
    while stack:
        for child in _children(stack.pop()):
            if isinstance(child, _CONTAINERS):
                leaves = _constant_leaves(child)
                if leaves >= MIN_LEAVES:
                    assert child.end_lineno is not None and child.end_col_offset is not None
                    spans.append((child.lineno, child.col_offset, child.end_lineno, child.end_col_offset,
                                  type(child)))
                    continue
            stack.append(child)


def _children(node: ast.AST) -> list[ast.AST]:
    """Where a literal may be masked: a definition's body only (its signature, decorators and bases are
    text the stubs and statements reuse), never inside a lambda or an f-string (3.11's positions there
    are not reliable)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(node.body)
    if isinstance(node, (ast.Lambda, ast.JoinedStr)):
        return []
    return list(ast.iter_child_nodes(node))


def _constant_leaves(node: ast.AST) -> int:
    """How many constants ``node`` is made of, or -1 when anything in it is not a constant."""
    if isinstance(node, ast.Constant):
        return 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _constant_leaves(node.operand)
    if isinstance(node, _CONTAINERS):
        parts = [*node.keys, *node.values] if isinstance(node, ast.Dict) else list(node.elts)
        total = 0
        for part in parts:
            if part is None:  # ``{**other}``
                return -1
            n = _constant_leaves(part)
            if n < 0:
                return -1
            total += n
        return total
    return -1
