"""``ast.parse`` and ``ast.literal_eval`` that are safe to call from several threads.

CPython 3.11 can raise ``SystemError: AST constructor recursion depth mismatch`` when two threads build
Python AST objects at once (python/cpython#106905: the depth counter is per interpreter, and a garbage
collection inside one thread's construction can switch to another's). The reward path parses test files in
``reward_many``'s threads and ``taskforge train --jobs N`` grades in threads, so every parse of the process
takes this one lock: a lock per module does not help, two modules then parse at once (CI, session 32).

Stdlib-only: a Harbor verifier ships it as ``harbor_pyparse.py`` next to the modules that import it.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """``ast.parse(source, filename, mode)`` under the process-wide lock."""
    with _LOCK:
        return ast.parse(source, filename, mode)


def literal_eval(node_or_string: str | ast.AST) -> Any:
    """``ast.literal_eval``; a string is parsed under the process-wide lock (a node needs no parse)."""
    if isinstance(node_or_string, str):
        node_or_string = parse(node_or_string.lstrip(" \t"), mode="eval")
    return ast.literal_eval(node_or_string)
