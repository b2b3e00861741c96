"""``ast.parse`` that is safe to call from several threads.

CPython 3.11 before 3.11.8 can raise ``SystemError: AST constructor recursion depth mismatch`` when two
threads build ASTs at once (python/cpython#106905); the reward path parses test files in
``reward_many``'s threads. One lock serialises the (fast) parse.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    with _LOCK:
        return ast.parse(source, filename)
