"""Fingerprints of deleted code: what the leak audit (``taskforge.audit.audit``) searches for.

A task may reveal the deleted entity's *name*, *signature* and *docstring* (the problem statement gives
them); it may not reveal its *body*. So the fingerprints are taken from the body only, and kept only
when they are *distinctive*: a fingerprint that also occurs in the remaining code of the workspace or
in the allowed text (problem statement, signatures) is dropped, so a hit means the body itself is out.

Three kinds, each searching a different form the body can take:

- ``line``: a body line, tokenized (comments dropped) and with every whitespace character removed;
  trivial lines (``pass``, ``else:``, ``return None`` ...) and short lines are dropped.
- ``ngram``: runs of ``NGRAM`` consecutive body tokens, whitespace-free, so a body reformatted or
  split differently across lines is still found.
- ``const`` / ``names``: the byte code of the compiled body: distinctive string, bytes and number
  constants, and the ``co_names`` sequence of each code object (what a ``.pyc`` keeps of a body).

Every text form is searched in *squashed* text: bytes with all ASCII whitespace removed. Matching is
an Aho-Corasick pass (``ahocorasick_rs``) per file, whatever the number of fingerprints.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import textwrap
import tokenize
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ahocorasick_rs

from taskforge.core import pyparse
from taskforge.core.definitions import implementations, named

NGRAM = 10  # tokens per n-gram fingerprint
MIN_LINE_CHARS = 12  # a squashed line shorter than this is not distinctive
MIN_NGRAM_CHARS = 24
MIN_CONST_CHARS = 8  # string/bytes constants shorter than this are too common to mean anything
MIN_NAMES = 3
MIN_NAMES_WITH_BUILTINS = 5  # a co_names sequence this long counts whatever its names; a shorter one needs
# MIN_NAMES that are not builtins
COPY_MIN_CHARS = 60  # ... and at least this many squashed characters of them
RENAMED_COPY_FRACTION = 0.95  # a def of another name holding this share of a body's lines is a renamed copy
COPY_FRACTION = 0.6  # a remaining file with this share of a body's lines is a copy of it  # a co_names sequence with fewer names is too common

_WS = b" \t\r\n\f\v"
_SKIP_TOKENS = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                          tokenize.ENDMARKER, tokenize.ENCODING})
TRIVIAL_LINES = frozenset({
    "pass", "...", "else:", "try:", "finally:", "except:", "exceptException:", "return", "returnNone",
    "returnTrue", "returnFalse", "returnself", "returnresult", "returnvalue", "returnx", "continue",
    "break", "raise", "raiseNotImplementedError", "raiseNotImplementedError()", "}", ")", "]", "):",
    "),", "],", "},", "@property", "@staticmethod", "@classmethod", "self", "result=[]", "result={}",
})


def squash(data: bytes) -> bytes:
    """Remove every ASCII whitespace byte: the normal form both fingerprints and haystacks are in."""
    return data.translate(None, _WS)


_WS_TABLE = str.maketrans("", "", _WS.decode())


def squash_text(text: str) -> str:
    """``squash`` for str: remove the same ASCII whitespace characters."""
    return text.translate(_WS_TABLE)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    entity: str  # qualified name of the deleted entity it was taken from
    kind: str  # "line" | "ngram" | "const" | "names"
    text: str  # squashed text (names: the co_names joined by ",")
    # a piece of one of its tokens, verbatim in any text that holds ``text`` (raw, HTML or escaped):
    # files without any anchor are not squashed and searched at all ("" = no anchor, always search)
    anchor: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.entity, "kind": self.kind, "text": self.text, "anchor": self.anchor}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fingerprint:
        return cls(d["entity"], d["kind"], d["text"], d.get("anchor", ""))


@dataclass(frozen=True, slots=True)
class FingerprintSet:
    """The distinctive fingerprints of every deleted entity of one task."""

    entities: tuple[str, ...]
    fingerprints: tuple[Fingerprint, ...]

    @property
    def text_patterns(self) -> tuple[Fingerprint, ...]:
        return tuple(f for f in self.fingerprints if f.kind != "names")

    @property
    def code_names(self) -> dict[tuple[str, ...], Fingerprint]:
        """``co_names`` sequence -> fingerprint, to match code objects unmarshalled from a ``.pyc``."""
        return {tuple(f.text.split(",")): f for f in self.fingerprints if f.kind == "names"}

    @property
    def leaf_names(self) -> frozenset[str]:
        return frozenset(e.rsplit(".", 1)[-1] for e in self.entities)

    def matcher(self) -> Matcher:
        return Matcher(self.text_patterns)

    def __len__(self) -> int:
        return len(self.fingerprints)

    def to_dict(self) -> dict[str, Any]:
        return {"entities": list(self.entities), "fingerprints": [f.to_dict() for f in self.fingerprints]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FingerprintSet:
        return cls(tuple(d["entities"]), tuple(Fingerprint.from_dict(f) for f in d["fingerprints"]))


class Matcher:
    """All squashed text patterns in one Aho-Corasick automaton (``ahocorasick_rs``, on bytes).

    ``find`` runs a leftmost-first pass first (several hundred MB/s: most files match nothing) and
    enumerates overlapping matches only in a file that matched at all.
    """

    __slots__ = ("_all", "_any", "_patterns")

    def __init__(self, patterns: Iterable[Fingerprint]) -> None:
        unique: dict[bytes, Fingerprint] = {}
        for fp in patterns:
            unique.setdefault(fp.text.encode("utf-8"), fp)
        self._patterns = tuple(unique.values())
        keys = list(unique)
        self._any: Any = ahocorasick_rs.BytesAhoCorasick(keys, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST) \
            if keys else None
        self._all: Any = ahocorasick_rs.BytesAhoCorasick(keys, matchkind=ahocorasick_rs.MATCHKIND_STANDARD) \
            if keys else None

    def find(self, squashed: bytes) -> list[Fingerprint]:
        """Fingerprints occurring in ``squashed`` (already whitespace-free), each once, in pattern order."""
        if self._any is None or not squashed or not self._any.find_matches_as_indexes(squashed):
            return []
        seen = {i for i, _start, _end in self._all.find_matches_as_indexes(squashed, overlapping=True)}
        return [self._patterns[i] for i in sorted(seen)]


def fingerprint(deleted_sources: Mapping[str, str], remaining: Iterable[bytes] = (),
                allowed: Iterable[str] = ()) -> FingerprintSet:
    """Distinctive fingerprints of each deleted entity's body.

    ``deleted_sources`` maps qualified name -> the entity's source as it was in the original (a def,
    a class, or a whole module). ``remaining`` holds the contents of the workspace's remaining code
    files; ``allowed`` the text the agent may see (problem statement, signatures). A fingerprint found
    in either is dropped, except that a remaining file holding most of a body's lines is taken for a
    copy of the deleted code (a leak the audit will report), not for remaining code.
    """
    candidates: list[Fingerprint] = []
    for qualname, source in deleted_sources.items():
        candidates.extend(_candidates(qualname, source))
    candidates = _dedupe(candidates)
    if not candidates:
        return FingerprintSet(tuple(deleted_sources), ())
    texts = [f for f in candidates if f.kind != "names"]
    matcher = Matcher(texts)
    lines_of: dict[str, int] = {}
    for f in candidates:
        if f.kind == "line":
            lines_of[f.entity] = lines_of.get(f.entity, 0) + 1
    dropped: set[Fingerprint] = set()
    for blob in remaining:
        found = matcher.find(squash(blob))
        if not _is_copy(found, lines_of) or not _defines_a_copy(blob, found, lines_of, deleted_sources):
            dropped.update(found)
    for text in allowed:
        dropped.update(matcher.find(squash(text.encode("utf-8"))))
    # by text: the matcher holds one fingerprint per text, and a deleted line of exactly NGRAM tokens is both
    # a ``line`` and an ``ngram`` fingerprint; dropping only the one found kept its twin, which the leak scan
    # then found in the very remaining code (docutils 0.23: 10 of 20 leak_found; click 8.5.1: 1)
    dropped_texts = {f.text for f in dropped}
    kept = tuple(f for f in candidates if f.text not in dropped_texts)
    return FingerprintSet(tuple(deleted_sources), kept)


def _is_copy(found: list[Fingerprint], lines_of: Mapping[str, int], fraction: float = COPY_FRACTION) -> bool:
    """A "remaining" file holding most of a deleted body is a copy of it (a leak), not remaining code."""
    hits: dict[str, int] = {}
    chars: dict[str, int] = {}
    for f in found:
        if f.kind == "line":
            hits[f.entity] = hits.get(f.entity, 0) + 1
            chars[f.entity] = chars.get(f.entity, 0) + len(f.text)
    # two short lines (``return self._validated(value)`` in every field of marshmallow's fields.py) are
    # the module's idiom, not a copy: a copy also holds COPY_MIN_CHARS of the body
    return any(n >= 2 and n >= fraction * lines_of[e] and chars[e] >= COPY_MIN_CHARS for e, n in hits.items())


def _defines_a_copy(blob: bytes, found: list[Fingerprint], lines_of: Mapping[str, int],
                    deleted_sources: Mapping[str, str]) -> bool:
    """Whether a remaining file that holds most of a deleted def's or class's lines holds them *as that
    entity*: a def or class at the same place in the module (``encode``, ``UUID._deserialize``) whose own
    lines hold most of the body. idna 3.20's ``decode`` holds 80% of ``encode``'s lines and is not a copy
    of it (every stub of ``encode`` was leak_found on its own module); ``build/lib/idna/core.py`` is. A
    deleted module, or a file that does not parse, is judged on the whole file (``_is_copy``)."""
    try:
        tree = pyparse.parse(blob)
    except (SyntaxError, ValueError):
        return True
    squashed_lines = [squash(line) for line in blob.splitlines()]
    defs = _defs_by_path(tree)
    for entity in {f.entity for f in found if f.kind == "line"}:
        if not _is_def(deleted_sources.get(entity, "")):
            if _is_copy([f for f in found if f.entity == entity], lines_of):
                return True
            continue
        for path, (start, end) in defs.items():
            inside = b"".join(squashed_lines[start - 1:end])
            mine = [f for f in found if f.entity == entity and f.text.encode() in inside]
            # at its own place, most of the body; under another name, all of it (a renamed copy)
            same_place = entity == path or entity.endswith("." + path)
            if _is_copy(mine, lines_of, COPY_FRACTION if same_place else RENAMED_COPY_FRACTION):
                return True
    return False


def _is_def(source: str) -> bool:
    try:
        body = pyparse.parse(textwrap.dedent(source)).body
    except (SyntaxError, ValueError):
        return False
    return len(body) == 1 and isinstance(body[0], ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)


def _defs_by_path(tree: ast.Module) -> dict[str, tuple[int, int]]:
    """Each def and class of a module by its dotted path in it (``UUID._deserialize``): (first, last line)."""
    out: dict[str, tuple[int, int]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                path = f"{prefix}{node.name}"
                out.setdefault(path, (node.lineno, node.end_lineno or node.lineno))
                visit(node.body, path + ".")
            elif isinstance(node, ast.If | ast.Try | ast.With):  # ``if PY2: def f(): ...``
                for block in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
                    visit(block or [], prefix)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body, prefix)

    visit(tree.body, "")
    return out


def candidates_of(sources: Mapping[str, str]) -> list[Fingerprint]:
    """Every fingerprint the bodies of ``sources`` (qualified name -> source) could give, before any is dropped
    as shared with remaining code: a superset of what ``fingerprint`` keeps for any subset of them."""
    out: list[Fingerprint] = []
    for qualname, source in sources.items():
        out.extend(_candidates(qualname, source))
    return _dedupe(out)


def _dedupe(fps: list[Fingerprint]) -> list[Fingerprint]:
    seen: set[tuple[str, str]] = set()
    out = []
    for f in fps:
        if (f.kind, f.text) not in seen:
            seen.add((f.kind, f.text))
            out.append(f)
    return out


def _candidates(qualname: str, source: str) -> list[Fingerprint]:
    source = textwrap.dedent(source)
    try:
        tree = pyparse.parse(source)
    except SyntaxError:
        return _plain_lines(qualname, source)
    excluded = _non_body_lines(tree)
    rows: dict[int, list[str]] = {}
    tokens: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in _SKIP_TOKENS or tok.start[0] in excluded:
                continue
            rows.setdefault(tok.start[0], []).append(tok.string)
            tokens.append(tok.string)
    except (tokenize.TokenError, IndentationError):
        return _plain_lines(qualname, source)
    out = []
    for parts in rows.values():
        line = "".join(squash_text(p) for p in parts)
        if len(line.encode()) >= MIN_LINE_CHARS and line not in TRIVIAL_LINES:
            out.append(Fingerprint(qualname, "line", line, best_anchor(parts)))
    for i in range(0, max(0, len(tokens) - NGRAM + 1)):
        gram = "".join(squash_text(t) for t in tokens[i:i + NGRAM])
        if len(gram.encode()) >= MIN_NGRAM_CHARS and has_rare_anchor(tokens[i:i + NGRAM]):  # else: generic shape
            out.append(Fingerprint(qualname, "ngram", gram, best_anchor(tokens[i:i + NGRAM])))
    out.extend(_bytecode(qualname, source, tree))
    return out


_ANCHOR_SPLIT = re.compile(r"[\s<>&\"'\\]+")  # whitespace and what HTML or JSON would escape
_COMMON = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | frozenset({
    "self", "cls", "string", "value", "values", "result", "data", "name", "item", "items", "args", "kwargs",
    "text", "key", "keys", "other", "obj", "node", "path", "append", "format", "get", "join", "split",
    "lower", "upper", "strip", "lstrip", "rstrip", "replace", "startswith", "endswith", "encode", "decode",
    "update", "copy", "sort", "index", "count", "extend", "insert", "remove", "pop", "group", "match"})


def best_anchor(tokens: Iterable[str]) -> str:
    """The longest uncommon piece of the tokens (a keyword or builtin only when nothing else is there)."""
    pieces = [p for t in tokens for p in _ANCHOR_SPLIT.split(t) if len(p.encode()) >= 3]
    rare = [p for p in pieces if p not in _COMMON and not p.isdigit()]
    return max(rare or pieces, key=lambda p: len(p.encode()), default="")


def has_rare_anchor(tokens: Iterable[str]) -> bool:
    return any(p not in _COMMON and not p.isdigit() for t in tokens for p in _ANCHOR_SPLIT.split(t)
               if len(p.encode()) >= 3)


def _plain_lines(qualname: str, source: str) -> list[Fingerprint]:
    out = []
    for raw in source.splitlines():
        line = squash_text(raw.split("#", 1)[0])
        if len(line) >= MIN_LINE_CHARS and line not in TRIVIAL_LINES:
            out.append(Fingerprint(qualname, "line", line, best_anchor(raw.split("#", 1)[0].split())))
    return out


def _non_body_lines(tree: ast.Module) -> set[int]:
    """Lines that are a header (decorators + ``def``/``class`` line) or a docstring: revealed, not body."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            body_first = node.body[0].lineno
            lines.update(range(first, body_first if body_first > node.lineno else node.lineno + 1))
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                lines.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return lines


def _docstrings(tree: ast.Module) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.add(doc)
    return out


def _bytecode(qualname: str, source: str, tree: ast.Module) -> list[Fingerprint]:
    try:
        module = compile(source, f"<deleted {qualname}>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return []
    docs = _docstrings(tree)
    own_names = {n for c in iter_code(module) for n in (c.co_name, c.co_qualname)}  # names are revealed
    out = []
    for code in iter_code(module):
        # a class body's __name__/__module__/__qualname__ is in every class: only other names count; and a short
        # sequence needs MIN_NAMES that are not builtins (configobj's ``_a_to_u`` and pygments'
        # ``_decodeifneeded`` are both isinstance,bytes,encoding,decode: the ConfigObj stub was refused leak_found)
        names = [n for n in code.co_names if not _is_dunder(n)]
        if code is not module and len(names) >= MIN_NAMES and (
                len(names) >= MIN_NAMES_WITH_BUILTINS or sum(n not in _BUILTINS for n in names) >= MIN_NAMES):
            out.append(Fingerprint(qualname, "names", ",".join(code.co_names)))
        for const in code.co_consts:
            text = const_text(const)
            if (text is not None and const not in docs and len(squash_text(text)) >= MIN_CONST_CHARS
                    and not _is_dunder(text) and text not in own_names):  # e.g. a class's own __qualname__
                out.append(Fingerprint(qualname, "const", squash_text(text), best_anchor([text])))
    return [f for f in out if f.text]


_BUILTINS = frozenset(dir(builtins))


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__") and name[2:-2].isidentifier()


def const_text(const: object) -> str | None:
    """The searchable text of a distinctive constant (None for constants too common to fingerprint)."""
    if isinstance(const, str):
        # a lone surrogate (ftfy 6.3.1's ``re.compile("[\\ud800-\\udfff]")``) is no text a file can hold as
        # UTF-8; its fingerprint broke every audit of the package (33 candidates ``internal_error``)
        return const if const.isascii() or _encodable(const) else None
    if isinstance(const, bytes):
        return const.decode("latin-1")
    if isinstance(const, bool) or not isinstance(const, int | float):
        return None
    if isinstance(const, int) and abs(const) >= 10_000_000:
        return repr(const)
    if isinstance(const, float) and len(repr(const).strip("-0.")) >= 6:
        return repr(const)
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def iter_code(code: types.CodeType) -> Iterable[types.CodeType]:
    """``code`` and every code object nested in its constants, depth first."""
    stack = [code]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


def entity_sources(read: Callable[[str], str | None], qualnames: Iterable[str],
                   src_roots: Iterable[str] = (".",)) -> dict[str, str]:
    """qualname -> its source in the original code, read through ``read(workspace-relative path)``.

    The module is the longest dotted prefix with a file (``a/b.py`` or ``a/b/__init__.py`` under a
    source root); the rest is walked in its AST (classes, then the def), decorators included. A
    module entity gives the whole file. Entities not found are left out.
    """
    out: dict[str, str] = {}
    for qualname in qualnames:
        found = locate(read, qualname, src_roots)
        if found is None:
            continue
        _rel, text, inner = found
        code = _segment(text, inner) if inner else text
        if code:
            out[qualname] = code
    return out


def locate(read: Callable[[str], str | None], qualname: str, src_roots: Iterable[str] = (".",)
           ) -> tuple[str, str, tuple[str, ...]] | None:
    """``(file, its text, the names inside it)`` of ``qualname``: the longest dotted prefix that is a module
    file (``a/b.py`` or ``a/b/__init__.py`` under a source root); ``()`` inside for a module itself."""
    roots = [r.strip("/") for r in src_roots if r.strip("/") not in ("", ".")] + [""]
    parts = qualname.split(".")
    for i in range(len(parts), 0, -1):
        for root in roots:
            base = "/".join([root, *parts[:i]]) if root else "/".join(parts[:i])
            for rel in (f"{base}.py", f"{base}/__init__.py"):
                text = read(rel)
                if text is not None:
                    return rel, text, tuple(parts[i:])
    return None


def _segment(text: str, path: tuple[str, ...]) -> str:
    """The implementations of ``path`` in ``text``, dedented, in file order, as the index takes them
    (``Entity.source_in``): of an overloaded name, not the first ``def`` (an ``@overload`` declaration, nothing
    to fingerprint) but the implementation; of an ``if``/``else`` pair, both. Declarations and a property's
    setter are left out: a stub keeps them, and their lines in the remaining file would look like a copy."""
    try:
        found = implementations(named(pyparse.parse(text), path))
    except SyntaxError:
        return ""
    lines = text.splitlines(keepends=True)
    return "".join(textwrap.dedent("".join(lines[d.start_line - 1:d.end_line])) for d in found)


def entity_sources_in_tree(root: Path | str, qualnames: Iterable[str],
                           src_roots: Iterable[str] = (".",)) -> dict[str, str]:
    """``entity_sources`` over a directory holding the original repository."""
    base = Path(root)

    def read(rel: str) -> str | None:
        path = base / rel
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None

    return entity_sources(read, qualnames, src_roots)
