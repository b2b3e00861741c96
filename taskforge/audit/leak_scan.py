"""Search one blob of bytes for fingerprints of deleted code, whatever form it is in.

A blob is a file of a workspace or an environment, a git object, or a member of an image layer. Forms
looked through: plain text (source, stubs, RECORD, JSON caches, with JSON/escape sequences undone),
HTML (tags stripped, entities unescaped: Sphinx ``viewcode`` pages), byte code (``.pyc``: unmarshalled
code objects, matched on ``co_names`` and constants; raw bytes when another Python wrote it), and
archives (zip/wheel/egg, tar, gzip/bz2/xz: sdists, cached wheels, pip HTTP cache bodies), recursively.

``strict=True`` is for third-party files (the environment's and the image's): what must be found there
is an installed or vendored *copy* of the project, never a short generic line that some other package
shares with the deleted body (``if res is not None:`` in sphinx, ``text = text.decode('utf-8')`` in
pygments). There a hit needs, for one deleted entity, at least half of its body fingerprints (lines and
n-grams) and ``STRICT_MIN_CHARS`` of matched text, or its byte code (``co_names`` sequences, at least two
when the entity has two).
"""

from __future__ import annotations

import bz2
import gzip
import html
import importlib.util
import io
import lzma
import marshal
import re
import tarfile
import types
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import ahocorasick_rs

from taskforge.audit.fingerprints import (
    Fingerprint,
    FingerprintSet,
    const_text,
    iter_code,
    squash,
    squash_text,
)

MAX_BLOB = 64 * 1024 * 1024  # bigger files are not read (see ``Scanner.wants``)
MAX_UNPACKED = 256 * 1024 * 1024  # decompression cap (zip bombs)
MAX_DEPTH = 3  # archives inside archives
STRICT_SHARE = 0.5  # strict: share of one entity's line/n-gram fingerprints a copy holds
STRICT_MIN_CHARS = 60  # strict: squashed characters of matched lines/n-grams, at least

_TAG = re.compile(rb"<[^<>]{0,2000}>")
_HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".xml", ".svg", ".ipynb")
_COMPRESSED: tuple[tuple[bytes, Any], ...] = ((b"\x1f\x8b", gzip.open), (b"BZh", bz2.open),
                                             (b"\xfd7zXZ\x00", lzma.open))
_NATIVE_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"MZ", b"!<arch>")
_SOURCE_SUFFIXES = (".py", ".pyi")  # read as they are: their own escapes are not stored source
_ARCHIVE_SUFFIXES = (".whl", ".zip", ".egg", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".body", ".jar")


@dataclass(frozen=True, slots=True)
class BlobHit:
    """Fingerprints found in one blob; ``where`` names the member inside an archive ("" at top)."""

    where: str
    matched: tuple[Fingerprint, ...]
    note: str = ""

    def evidence(self) -> str:
        kinds = sorted({f.kind for f in self.matched})
        first = max(self.matched, key=lambda f: (f.kind == "line", f.kind != "const", len(f.text)))
        shown = first.text if len(first.text) <= 80 else first.text[:77] + "..."
        at = f" in {self.where}" if self.where else ""
        note = f" ({self.note})" if self.note else ""
        return (f"{len(self.matched)} fingerprint(s) of {first.entity} [{', '.join(kinds)}]{at}{note}: "
                f"{shown!r}")


@dataclass
class Scanner:
    """Scans blobs against one task's fingerprints; build once per task, reuse for every file."""

    fingerprints: FingerprintSet
    max_blob: int = MAX_BLOB
    bytes_scanned: int = 0
    _matcher: object = field(init=False, repr=False)
    _names: dict[tuple[str, ...], Fingerprint] = field(init=False, repr=False)
    _consts: dict[str, Fingerprint] = field(init=False, repr=False)
    _n_consts: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._matcher = self.fingerprints.matcher()
        self._names = self.fingerprints.code_names
        self._consts = {f.text: f for f in self.fingerprints.fingerprints if f.kind == "const"}
        self._n_consts = len(self._consts)
        self._text_total: dict[str, int] = {}
        self._names_total: dict[str, int] = {}
        for f in self.fingerprints.fingerprints:
            if f.kind in ("line", "ngram"):
                self._text_total[f.entity] = self._text_total.get(f.entity, 0) + 1
            elif f.kind == "names":
                self._names_total[f.entity] = self._names_total.get(f.entity, 0) + 1
        self._module_parts = {p for e in self.fingerprints.entities for p in e.split(".")}
        self._name_sets = [[n.encode() for n in names] for names in self._names]
        self._numeric = any(_is_number(f.text) for f in self._consts.values())  # only marshal finds these
        anchors = [f.anchor for f in self.fingerprints.text_patterns]
        self._anchors: Any = None
        if anchors and all(anchors):
            self._anchors = ahocorasick_rs.BytesAhoCorasick(sorted({a.encode() for a in anchors}),
                                                            matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST)

    def wants(self, size: int) -> bool:
        return size <= self.max_blob

    def skips_native(self, name: str, head: bytes) -> bool:
        """A native library or executable, unless named like a module that lost code (its compiled form).

        Other packages' binaries cannot hold the project's deleted Python, and they are most of the
        bytes of an environment.
        """
        if not head.startswith(_NATIVE_MAGIC):
            return False
        return name.split(".", 1)[0] not in self._module_parts

    def scan(self, data: bytes, name: str = "", depth: int = 0, strict: bool = False,
             collect: bool = False) -> list[BlobHit]:
        """Every place in ``data`` (and archives inside it) where enough fingerprints occur
        (``strict``: enough for a copy of the deleted code, module docstring). ``collect``: every place
        where any fingerprint occurs, each with all it holds (every view searched; ``EnvironmentIndex``)."""
        self.bytes_scanned += len(data)
        lower = name.lower()
        if depth < MAX_DEPTH:
            inner = self._archive(data, lower, depth, strict, collect)
            if inner is not None:
                return inner
        found: dict[Fingerprint, None] = {}
        note = ""
        if data[:4] == importlib.util.MAGIC_NUMBER or lower.endswith((".pyc", ".pyo")):
            found.update(dict.fromkeys(self._bytecode(data)))
            note = "byte code"
        if self._anchors is not None and not self._anchors.find_matches_as_indexes(data):
            views: Iterator[bytes] = iter(())  # no fingerprint can be in any view of it
        else:
            views = self._views(data, lower)
        enough = (lambda _m: False) if collect else self._copy if strict else self._enough
        for view in views:
            found.update(dict.fromkeys(self._matcher.find(view)))  # type: ignore[attr-defined]
            if enough(tuple(found)):
                break
        matched = tuple(found)
        if (collect and matched) or enough(matched):
            return [BlobHit("", matched, note)]
        return []

    def copy_of(self, matched: tuple[Fingerprint, ...]) -> bool:
        """The strict verdict on ``matched`` (fingerprints of this scanner's set found in one blob)."""
        return self._copy(matched)

    def _copy(self, matched: tuple[Fingerprint, ...]) -> bool:
        """Strict: a copy of one deleted entity (most of its body, or its byte code), not shared idioms."""
        text: dict[str, list[Fingerprint]] = {}
        names: dict[str, int] = {}
        for f in matched:
            if f.kind in ("line", "ngram"):
                text.setdefault(f.entity, []).append(f)
            elif f.kind == "names":
                names[f.entity] = names.get(f.entity, 0) + 1
        for entity, fps in text.items():
            if (len(fps) >= max(2, STRICT_SHARE * self._text_total.get(entity, 0))
                    and sum(len(f.text) for f in fps if f.kind == "line") + max(
                        (len(f.text) for f in fps if f.kind == "ngram"), default=0) >= STRICT_MIN_CHARS):
                return True
        return any(n >= min(2, self._names_total.get(e, 0)) for e, n in names.items())

    def _enough(self, matched: tuple[Fingerprint, ...]) -> bool:
        """A code object, or two body lines / n-grams; constants alone only when most of them are there.

        One line or n-gram alone is not enough: idioms recur in unrelated code (pygments has
        ``if separator:`` and ``raise NotImplementedError(``, pytest ``func(*args, **kwargs)`` + ``try:``);
        a real copy of deleted code matches more than one.
        """
        if any(f.kind == "names" for f in matched) or sum(f.kind in ("line", "ngram") for f in matched) >= 2:
            return True
        consts = sum(1 for f in matched if f.kind == "const")
        return consts > 0 and consts >= min(2, self._n_consts)

    def _views(self, data: bytes, lower: str) -> Iterator[bytes]:
        """The squashed forms of ``data`` to search, cheapest first (computed only when reached)."""
        yield squash(data)
        if lower.endswith(_HTML_SUFFIXES) or data[:512].lstrip()[:1] == b"<":
            yield squash(html.unescape(_TAG.sub(b"", data).decode("utf-8", "replace")).encode("utf-8"))
        if not lower.endswith(_SOURCE_SUFFIXES) and (b"\\n" in data or b'\\"' in data):
            yield squash(_unescape(data))  # source kept inside a JSON/Python string

    def _bytecode(self, data: bytes) -> list[Fingerprint]:
        if data[:4] != importlib.util.MAGIC_NUMBER:
            return []  # another Python's byte code: the raw view still finds its string constants
        if not self._numeric and not any(all(n in data for n in names) for names in self._name_sets):
            return []  # no code object can match: skip unmarshalling (most .pyc of an environment)
        try:
            code = marshal.loads(data[16:])
        except (ValueError, EOFError, TypeError):
            return []
        if not isinstance(code, types.CodeType):
            return []
        out = []
        for c in iter_code(code):
            hit = self._names.get(tuple(c.co_names))
            if hit is not None:
                out.append(hit)
            for const in c.co_consts:
                text = const_text(const)
                if text is not None and (f := self._consts.get(squash_text(text))) is not None:
                    out.append(f)
        return out

    def _archive(self, data: bytes, lower: str, depth: int, strict: bool = False,
                 collect: bool = False) -> list[BlobHit] | None:
        """Hits inside ``data`` when it is an archive or a compressed stream; None when it is neither."""
        if data[:4] == b"PK\x03\x04" or (lower.endswith(_ARCHIVE_SUFFIXES) and b"PK\x05\x06" in data[-65600:]):
            try:
                zf = zipfile.ZipFile(io.BytesIO(data))
            except (zipfile.BadZipFile, OSError):
                return None
            return self._members(((i.filename, i.file_size, lambda i=i: zf.read(i)) for i in zf.infolist()
                                  if not i.is_dir()), depth, strict, collect)
        opener = next((o for magic, o in _COMPRESSED if data.startswith(magic)), None)
        if opener is not None:
            try:
                with opener(io.BytesIO(data), "rb") as stream:
                    unpacked = stream.read(MAX_UNPACKED)
            except (OSError, EOFError, lzma.LZMAError):
                return None
            return self.scan(unpacked, lower.rsplit(".", 1)[0], depth + 1, strict, collect)
        if len(data) > 262 and data[257:262] == b"ustar":
            try:
                tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
            except tarfile.TarError:
                return None
            return self._members(((m.name, m.size, lambda m=m: _tar_read(tf, m)) for m in tf.getmembers()
                                  if m.isfile()), depth, strict, collect)
        return None

    def _members(self, members, depth: int, strict: bool = False,  # type: ignore[no-untyped-def]
                 collect: bool = False) -> list[BlobHit]:
        hits = []
        for member, size, read in members:
            if not self.wants(size):
                continue
            for hit in self.scan(read(), member, depth + 1, strict, collect):
                where = f"{member}!{hit.where}" if hit.where else member
                hits.append(BlobHit(where, hit.matched, hit.note))
        return hits


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _unescape(data: bytes) -> bytes:
    """Undo JSON/Python string escapes (``\\n``, ``\\"``, ``\\\\``...): source stored inside a string."""
    out = data.replace(b"\\\\", b"\x00")
    for escaped, plain in ((b"\\n", b"\n"), (b"\\t", b"\t"), (b"\\r", b"\r"), (b'\\"', b'"'), (b"\\'", b"'"),
                           (b"\\/", b"/")):
        out = out.replace(escaped, plain)
    return out.replace(b"\x00", b"\\")


def _tar_read(tf: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    f = tf.extractfile(member)
    return f.read() if f is not None else b""
