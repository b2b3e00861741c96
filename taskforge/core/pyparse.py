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
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

_LOCK = threading.Lock()
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # the lines as the parser splits them (\f is no break)


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """``ast.parse(source, filename, mode)`` under the process-wide lock."""
    with _LOCK:
        return ast.parse(source, filename, mode)


def parse_files(root: Path, rels: Iterable[str]) -> Iterator[tuple[str, ast.Module]]:
    """``(rel, tree)`` of each file ``root/rel`` that reads as UTF-8 and parses; the others are left out."""
    for rel in rels:
        try:
            yield rel, parse((root / rel).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue


def literal_eval(node_or_string: str | ast.AST) -> Any:
    """``ast.literal_eval``; a string is parsed under the process-wide lock (a node needs no parse)."""
    if isinstance(node_or_string, str):
        node_or_string = parse(node_or_string.lstrip(" \t"), mode="eval")
    return ast.literal_eval(node_or_string)


def source_segments(source: str) -> Callable[[ast.AST], str | None]:
    """``ast.get_source_segment(source, node)`` for many nodes of one source, the source split once.

    On Python 3.11 each ``get_source_segment`` call splits the whole source again, a character at a time in
    Python: 0.11 s a call for pycparser's 255 KB test_c_parser.py, 60 CPU-s for the 1,859 assertions its seals
    read (every grading of a task paid it before pytest started)."""
    lines = _LINE.findall(source)

    def segment(node: ast.AST) -> str | None:
        try:
            lineno, end_lineno = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined,operator]
            col_offset, end_col_offset = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # no position (end_lineno None: TypeError)
            return None
        if end_col_offset is None:
            return None
        if end_lineno == lineno:
            return lines[lineno].encode()[col_offset:end_col_offset].decode()
        first = lines[lineno].encode()[col_offset:].decode()
        last = lines[end_lineno].encode()[:end_col_offset].decode()
        return "".join([first, *lines[lineno + 1:end_lineno], last])

    return segment
