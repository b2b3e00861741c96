"""Statements that are enough: the hidden tests may only need what the agent can know.

``check_statement`` reads the hidden test code (the lines the test hiding removed) and the deleted code,
and finds:

- *missing interfaces*: deleted entities the hidden tests name (as an identifier) whose path and
  signature the statement does not give; they are appended to the statement (path, signature,
  docstring), so every name the tests use from the deleted code is stated;
- *undetermined values*: literals the hidden tests assert on (lines with ``assert``, ``match=``,
  ``raises``, ``==``) that the deleted code held and nothing visible holds (the rest of the workspace,
  the remaining tests, the statement): an exact error message, a constant only the deleted body had.
  They are appended to the statement as values the tests check; more than ``max_undetermined`` of them
  rejects the task (``RejectReason.UNDERSPECIFIED``): the statement would have to spell out the body.

A task is *flagged* when the statement as written lacked anything (missing interfaces or undetermined
values). ``flagged_share(tasks)`` reports the flagged share per repository and strategy; the result of
each check is recorded in ``task.provenance["statement_check"]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generators.static_index import StaticIndex
from taskforge.core.entities import Entity, EntityKind

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r"""(?P<q>["'])(?P<s>(?:\\.|(?!(?P=q)).){6,}?)(?P=q)""")
_NUMBER = re.compile(r"(?<![\w.])(\d+\.\d+|\d{3,})(?![\w.])")
_ASSERTING = re.compile(r"\bassert|match\s*=|raises|==")
MAX_LISTED = 12


@dataclass(frozen=True, slots=True)
class StatementCheck:
    statement: str  # the statement, completed with what was missing
    missing: tuple[str, ...] = ()  # qualnames the hidden tests use that the statement did not give
    undetermined: tuple[str, ...] = ()  # literals asserted on that only the deleted code held
    rejected: str = ""  # why the task cannot be stated fairly ("" = it can)

    @property
    def flagged(self) -> bool:
        return bool(self.missing or self.undetermined)

    def to_dict(self) -> dict[str, Any]:
        return {"missing": list(self.missing), "undetermined": list(self.undetermined),
                "flagged": self.flagged, "rejected": self.rejected}


def hidden_code(original: Mapping[str, str | None], broken: Mapping[str, str | None], is_test: Any) -> str:
    """The test lines the hiding removed (whole removed test files included)."""
    from taskforge.core.linediff import opcodes

    out: list[str] = []
    for path, before in sorted(original.items()):
        if before is None or not is_test(path):
            continue
        after = broken.get(path)
        old = before.splitlines()
        if after is None:
            out.extend(old)
            continue
        for tag, i1, i2, _, _ in opcodes(old, after.splitlines()):
            if tag in ("delete", "replace"):
                out.extend(old[i1:i2])
    return "\n".join(out)


def _deleted_source(e: Entity, original: Mapping[str, str | None], root: Path) -> str:
    text = original.get(e.file)
    if text is None:
        try:
            text = (root / e.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return ""
    return "\n".join(text.splitlines()[e.start_line - 1:e.end_line])


def _given(e: Entity, statement: str) -> bool:
    """The statement gives the entity's path (its file or qualified name) and its signature."""
    has_path = e.qualname in statement or e.file in statement
    return has_path and (not e.signature or e.signature in statement)


def _literals(code: str) -> list[str]:
    found: dict[str, None] = {}
    for line in code.splitlines():
        if not _ASSERTING.search(line):
            continue
        for m in _STRING.finditer(line):
            found[m.group("s")] = None
        for m in _NUMBER.finditer(line):
            found[m.group(1)] = None
    return list(found)


def visible_corpus(root: Path, files: Iterable[str], broken: Mapping[str, str | None]) -> str:
    """What the agent can read: the workspace's code and remaining tests, as broken."""
    texts = []
    for rel in sorted(set(files) | set(broken)):
        if rel in broken:
            t = broken[rel]
            if t is not None:
                texts.append(t)
            continue
        try:
            texts.append((root / rel).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return "\n".join(texts)


def check_statement(statement: str, deleted: Iterable[str], index: StaticIndex, repo_root: Path,
                    original: Mapping[str, str | None], broken: Mapping[str, str | None], is_test: Any,
                    max_undetermined: int = 6, names_visible: bool = False) -> StatementCheck:
    """Complete ``statement`` for the hidden tests of a task, or say why it cannot be (module docstring).

    ``names_visible``: the deleted entities' signatures stay in the workspace (a stub), so no name is missing.
    """
    from generators.problem_statement import render_interface

    tests = hidden_code(original, broken, is_test)
    idents = set(_IDENT.findall(tests))
    ents = [e for q in deleted if (e := index.get(q)) is not None and e.kind is not EntityKind.MODULE]
    missing = [] if names_visible else [e for e in ents if e.qualname.rsplit(".", 1)[-1] in idents
                                         and not _given(e, statement)]
    listed = {e.qualname for e in missing if e.kind is EntityKind.CLASS}  # a class is rendered with its methods
    missing = [e for e in missing if e.qualname.rsplit(".", 1)[0] not in listed]
    body = "\n".join(_deleted_source(e, original, Path(repo_root)) for e in ents)
    visible = visible_corpus(Path(repo_root), (*index.source_files, *index.test_files), broken)
    undetermined = [v for v in _literals(tests) if v in body and v not in visible and v not in statement]
    extra: list[str] = []
    if missing:
        extra.append("## Also used by the tests\n")
        extra.extend(render_interface(e, index, "-") for e in missing)
    if undetermined:
        extra.append("## Exact values the tests check\n")
        extra.append("The tests compare against these literal values (messages, constants) exactly:\n\n"
                     + "\n".join(f"- `{v}`" for v in undetermined[:MAX_LISTED]) + "\n")
    text = statement
    if extra:
        tail = "Do not change the tests; they will be run against your implementation.\n"
        head = statement[: -len(tail)] if statement.endswith(tail) else statement
        text = head.rstrip("\n") + "\n\n" + "\n".join(p.rstrip("\n") + "\n" for p in extra) + "\n" + tail
    rejected = ""
    if 0 <= max_undetermined < len(undetermined):
        rejected = (f"the hidden tests assert on {len(undetermined)} values only the deleted code held, "
                    f"e.g. {undetermined[0]!r}")
    return StatementCheck(text, tuple(e.qualname for e in missing), tuple(undetermined), rejected)


def flagged_share(tasks: Iterable[Any]) -> dict[tuple[str, str], tuple[int, int]]:
    """``(repo, strategy) -> (flagged, checked)`` over tasks whose provenance records a statement check."""
    out: dict[tuple[str, str], list[int]] = {}
    for t in tasks:
        check = (t.provenance or {}).get("statement_check")
        if not isinstance(check, Mapping):
            continue
        cell = out.setdefault((t.repo, t.strategy), [0, 0])
        cell[0] += int(bool(check.get("flagged")))
        cell[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}


def flagged_line(tasks: Iterable[Any]) -> str:
    """One summary line: ``statements flagged: repo/strategy 2/10, ...`` ("" when nothing was checked)."""
    share = flagged_share(tasks)
    if not share:
        return ""
    return "statements flagged (then completed): " + ", ".join(
        f"{repo}/{strategy} {f}/{n} ({100 * f / n:.0f}%)" for (repo, strategy), (f, n) in share.items())
