"""The audit's structural rule: no definition of a stubbed or deleted entity may still hold code in the workspace.

The fingerprint search sees a body left in place only if it was given that body (then its copy rule takes
a remaining file holding most of the body's lines for a leak). Red team session 40: itsdangerous 2.2.0's
``TimestampSigner.unsign`` is two ``@t.overload`` declarations then an 87-line implementation; the index
took the first ``def`` for the entity, the stub replaced that declaration's ``...``, the implementation
stayed in ``src/itsdangerous/timed.py``, and both the validator (the index's span) and ``taskforge audit``
(the first ``def`` of the name) fingerprinted the declaration: nothing to find, "clean".

So this rule trusts nothing the generator decided and needs no fingerprint: for each listed entity it reads
the module the qualified name points at in the agent's workspace (``fingerprints.locate``) and looks at
*every* definition of the name there (``taskforge.core.definitions``, stdlib ``ast``). One that holds code
(more than a docstring and ``...`` / ``pass`` / ``raise NotImplementedError``) is a hit. A property's
``@x.setter`` / ``@x.deleter`` is exempt: a stub of the property stubs its getter and keeps those,
functions of their own.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from taskforge.audit.fingerprints import locate
from taskforge.core import pyparse
from taskforge.core.definitions import named
from taskforge.core.entities import DefinitionRole
from taskforge.core.task import LeakHit


def live_definitions(workspace: Path, qualnames: Iterable[str], src_roots: Iterable[str] = (".",)
                     ) -> Iterator[LeakHit]:
    """A ``workspace`` hit for each definition of a ``qualnames`` entity that still holds code."""
    roots = tuple(src_roots)
    texts: dict[str, str | None] = {}
    trees: dict[str, ast.Module | None] = {}

    def read(rel: str) -> str | None:
        if rel not in texts:
            path = workspace / rel
            texts[rel] = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
        return texts[rel]

    for qualname in qualnames:
        found = locate(read, qualname, roots)
        if found is None or not found[2]:  # nowhere (a removed module) or a module itself: the fingerprints' job
            continue
        rel, text, inner = found
        if rel not in trees:
            try:
                trees[rel] = pyparse.parse(text)
            except (SyntaxError, ValueError):
                trees[rel] = None  # not Python the agent can run either; the fingerprints still search it
        tree = trees[rel]
        if tree is None:
            continue
        for d in named(tree, inner):
            if d.holds_code and d.role is not DefinitionRole.ACCESSOR:
                yield LeakHit("workspace", rel, f"{qualname} is listed as stubbed or deleted, but its definition at "
                              f"{rel}:{d.start_line}-{d.end_line} ({d.end_line - d.start_line + 1} lines) still "
                              "holds code: the edit missed it (an @overload declaration taken for the "
                              "implementation, or a name defined twice)")
