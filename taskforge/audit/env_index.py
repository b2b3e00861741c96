"""One reading of an environment for the leak audits of every candidate of a repository.

Every candidate's audit searches the same environment (the repository's one virtualenv) for its own
fingerprints, and reading, decoding and searching every file of it again for each candidate was the
largest share of a validation worker's own CPU (python-slugify: about 40% of the generate process's
samples in py-spy, mostly walking, reading and scanning site-packages).

``EnvironmentIndex.build(root, sources)`` reads the environment once with the fingerprints of *every*
entity of the repository (``sources``: qualified name -> original source; ``fingerprints.candidates_of``,
before any is dropped as shared with remaining code) and keeps, for each blob that holds any of them
(a file, or ``file!member`` of an archive), the set of fingerprint texts found there. A candidate's
fingerprints are a subset of those (the same entities' bodies, fewer kept), so ``hits(scanner)`` gives
the same verdict as reading the tree again: per blob, the candidate's fingerprints among the texts found,
judged by the scanner's strict rule (``Scanner.copy_of``). ``covers(fps)`` says whether that holds for a
given set; the audit reads the tree as before when it does not. The index is valid while the
environment is unchanged, which holds for the life of one generate run (the environment is built once,
before any candidate, and only read afterwards).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from taskforge.audit.audit import scan_tree
from taskforge.audit.fingerprints import Fingerprint, FingerprintSet, candidates_of
from taskforge.audit.leak_scan import BlobHit, Scanner
from taskforge.core.task import LeakHit

Key = tuple[str, str]  # ("names" | "text", squashed text): what a blob was found to hold


def fingerprint_key(f: Fingerprint) -> Key:
    return ("names" if f.kind == "names" else "text", f.text)


@dataclass(frozen=True, slots=True)
class IndexedBlob:
    path: str  # relative to the environment's root; ``file!member`` inside an archive
    keys: frozenset[Key]
    note: str = ""
    where: str = ""  # the member inside an archive, as the scan's evidence names it


@dataclass(frozen=True, slots=True)
class EnvironmentIndex:
    """The blobs of one environment that hold any fingerprint of a repository's code (module docstring)."""

    root: str
    keys: frozenset[Key]  # every fingerprint the index was built with
    blobs: tuple[IndexedBlob, ...]
    seconds: float = 0.0

    @classmethod
    def build(cls, root: Path | str, sources: Mapping[str, str], skip: Iterable[str] = ()) -> EnvironmentIndex:
        """``skip``: folders of ``root`` (relative) that are not read (``audit.scan_tree``)."""
        start = time.perf_counter()
        fps = candidates_of(sources)
        scanner = Scanner(FingerprintSet(tuple(sources), tuple(fps)))
        blobs = tuple(IndexedBlob(path, frozenset(fingerprint_key(f) for f in hit.matched), hit.note, hit.where)
                      for path, hit in scan_tree(Path(root), scanner, strict=True, collect=True, skip=skip))
        return cls(str(root), frozenset(fingerprint_key(f) for f in fps), blobs, time.perf_counter() - start)

    def covers(self, fps: FingerprintSet) -> bool:
        """Whether every fingerprint of ``fps`` was searched for when the index was built."""
        return all(fingerprint_key(f) in self.keys for f in fps.fingerprints)

    def hits(self, scanner: Scanner, channel: str = "environment") -> list[LeakHit]:
        """What reading the environment with ``scanner`` (strict) would find; needs ``covers``."""
        # the fingerprint a scan reports for a text, as ``Matcher`` (first per text) and ``Scanner._names``
        # (last per co_names sequence) pick it
        by_key: dict[Key, Fingerprint] = {}
        for f in scanner.fingerprints.fingerprints:
            if f.kind == "names":
                by_key[fingerprint_key(f)] = f
            else:
                by_key.setdefault(fingerprint_key(f), f)
        out: list[LeakHit] = []
        for blob in self.blobs:
            matched = tuple(by_key[k] for k in blob.keys if k in by_key)
            if matched and scanner.copy_of(matched):
                out.append(LeakHit(channel, blob.path, BlobHit(blob.where, matched, blob.note).evidence()))
        return out

