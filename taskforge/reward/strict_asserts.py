"""Equality an always-equal object cannot fake: hidden tests' ``assert a == b`` made strict at grading.

An "implementation" that returns an object whose ``__eq__`` is always true passes every
``assert f(x) == expected``. At grading, the hidden test files (restored from the original, so the
grader owns them) are rewritten with libcst: ``assert A == B`` becomes ``assert NAME(A, B)`` (message,
position and everything else kept), where ``NAME`` is a random builtin the grading plugin installs
before any project code runs (``taskforge/reward/grading_plugin.py``: ``strict_eq``). It compares as
``==`` does, then refuses a true result when a side holds a subclass of a plain type (str, bytes, int,
float, tuple, list, dict, set, frozenset) with its own ``__eq__`` and the two sides' base-type contents
differ (the subclass's ``__eq__`` alone decides nothing), or when either side (or an element of a list,
tuple, set or dict on either side) is an instance of a class defined in the workspace that also equals a
decoy: a value of the other side's type and shape with other content, which honest values do not equal and
a lying ``__eq__`` cannot tell from the expected value by its class. Types from the standard library or
site-packages (``unittest.mock.ANY`` is meant to equal anything) are trusted by the decoy check.
``TestCase.assertEqual`` gets the same check in the plugin.

A side that the test file builds itself from one of its own classes with an ``__eq__`` (toolz's
``assert composed == AlwaysEquals()``, a matcher object) is the grader's value, not the code under test's:
the call becomes ``NAME(A, B, SIDE)`` and only the other side is checked (SIDE 1: the left is the test
file's own, 2: the right). The side the code under test produced is checked as before.
"""

from __future__ import annotations

import ast
import functools
import re

import libcst as cst

from taskforge.core import pyparse


def _own_eq_classes(source: str) -> frozenset[str]:
    """Names of the classes the test file defines (at any depth) whose body defines ``__eq__``: read with
    ``ast``, and not at all when ``__eq__`` is nowhere in the text (a libcst visit of idna's 1.4 MB test file
    took seconds in every task's gradings)."""
    if "__eq__" not in source:
        return frozenset()
    try:
        tree = pyparse.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and any(
        isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == "__eq__" for s in node.body))


def _built_by_file(expr: cst.BaseExpression, classes: frozenset[str]) -> bool:
    """``C(...)`` with ``C`` one of the file's own classes that define ``__eq__``."""
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in classes


class _StrictEq(cst.CSTTransformer):
    def __init__(self, name: str, own: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.own = own
        self.changed = 0

    def leave_Assert(self, original: cst.Assert, updated: cst.Assert) -> cst.Assert:
        test = updated.test
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return updated
        target = test.comparisons[0]
        if not isinstance(target.operator, cst.Equal):
            return updated
        self.changed += 1
        side = 1 if _built_by_file(test.left, self.own) else 2 if _built_by_file(target.comparator, self.own) else 0
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args = [cst.Arg(test.left, comma=comma), cst.Arg(target.comparator, comma=comma if side else cst.MaybeSentinel.DEFAULT)]
        if side:
            args.append(cst.Arg(cst.Integer(str(side))))
        call = cst.Call(func=cst.Name(self.name), args=args)
        return updated.with_changes(test=call.with_changes(lpar=test.lpar, rpar=test.rpar))


_PLACEHOLDER = "__taskforge_strict_eq__"
_ASSERT = re.compile(r"\bassert\b")  # an ``assert`` statement needs the keyword (``assertEqual`` is no match)


def strict_source(source: str, name: str) -> str:
    """``source`` with every ``assert A == B`` turned into ``assert name(A, B)``; unparsable: unchanged."""
    return _strict(source).replace(f"{_PLACEHOLDER}(", f"{name}(")


@functools.lru_cache(maxsize=512)
def _strict(source: str) -> str:
    if _PLACEHOLDER in source or not _ASSERT.search(source):  # nothing to rewrite: no parse
        return source
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return source
    transformer = _StrictEq(_PLACEHOLDER, _own_eq_classes(source))
    out = module.visit(transformer)
    return out.code if transformer.changed else source


__all__ = ["strict_source"]
