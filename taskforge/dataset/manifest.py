"""The dataset directory layout and its manifest (written last: its presence means the set is complete).

    DIR/
      manifest.json          schema version, taskforge version, counts, shards and archives + sha256
      data/shard-NNNNN.parquet   task rows (zstd, explicit row groups)
      repos/<repo>-<commit>.tar.gz   the original tree of each (repo, base_commit): the reward path
                                     rebuilds the original and the broken workspace from it alone
      funnel.json            rejection funnel and per-repo stats of the runs that wrote the dataset
      README.md              the dataset card, generated from the data

Every file is written to ``*.tmp`` first and renamed into place (``write_bytes_atomic``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskforge.core.errors import DatasetError
from taskforge.core.files import fsync_dir, write_atomic

FORMAT = "taskforge-dataset"
MANIFEST = "manifest.json"
DATA_DIR = "data"
REPOS_DIR = "repos"
FUNNEL = "funnel.json"
CARD = "README.md"
SHARD_GLOB = "shard-*.parquet"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def commit_file(tmp: Path, final: Path) -> None:
    """fsync ``tmp`` and rename it over ``final`` (atomic on POSIX), then fsync the directory."""
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fsync_dir(final.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    write_atomic(path, data, durable=True)


def write_json_atomic(path: Path, obj: Any) -> None:
    write_bytes_atomic(path, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode())


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file of the dataset (shard or archive), its size and sha256; ``rows`` for shards."""

    path: str  # relative to the dataset root, with forward slashes
    sha256: str
    bytes: int
    rows: int = 0
    repo: str = ""  # archives only
    base_commit: str = ""  # archives only

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "sha256": self.sha256, "bytes": self.bytes}
        if self.repo or self.base_commit:
            d.update(repo=self.repo, base_commit=self.base_commit)
        else:
            d["rows"] = self.rows
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FileEntry:
        return cls(d["path"], d["sha256"], int(d["bytes"]), int(d.get("rows", 0)), d.get("repo", ""),
                   d.get("base_commit", ""))

    @classmethod
    def of(cls, root: Path, path: Path, **kw: Any) -> FileEntry:
        return cls(path.relative_to(root).as_posix(), sha256_file(path), path.stat().st_size, **kw)

    def verify(self, root: Path) -> None:
        """Raise ``DatasetError`` unless the file exists with the recorded size and sha256."""
        p = root / self.path
        if not p.is_file():
            raise DatasetError(f"dataset {root}: {self.path} is listed in {MANIFEST} but missing; "
                               "restore it or regenerate the dataset")
        size = p.stat().st_size
        if size != self.bytes:
            raise DatasetError(f"dataset {root}: {self.path} has {size} bytes, {MANIFEST} says {self.bytes} "
                               "(truncated or replaced); restore it or regenerate the dataset")
        digest = sha256_file(p)
        if digest != self.sha256:
            raise DatasetError(f"dataset {root}: {self.path} sha256 {digest[:12]}... != {MANIFEST} "
                               f"{self.sha256[:12]}... (corrupted); restore it or regenerate the dataset")


@dataclass(frozen=True, slots=True)
class Manifest:
    schema_version: int
    taskforge_version: str
    created_at: str
    updated_at: str
    counts: Mapping[str, Any]  # tasks, shards, duplicates_dropped, by_repo, by_strategy, by_tier
    shards: tuple[FileEntry, ...]
    archives: tuple[FileEntry, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)  # how the shards were written

    @property
    def num_tasks(self) -> int:
        return sum(s.rows for s in self.shards)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "schema_version": self.schema_version,
            "taskforge_version": self.taskforge_version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "counts": dict(self.counts),
            "shards": [s.to_dict() for s in self.shards],
            "archives": [a.to_dict() for a in self.archives],
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Manifest:
        return cls(
            schema_version=int(d["schema_version"]),
            taskforge_version=str(d.get("taskforge_version", "")),
            created_at=str(d.get("created_at", "")),
            updated_at=str(d.get("updated_at", "")),
            counts=dict(d.get("counts", {})),
            shards=tuple(FileEntry.from_dict(s) for s in d.get("shards", ())),
            archives=tuple(FileEntry.from_dict(a) for a in d.get("archives", ())),
            options=dict(d.get("options", {})),
        )

    def write(self, root: Path) -> None:
        write_json_atomic(root / MANIFEST, self.to_dict())


def read_manifest(root: Path) -> Manifest | None:
    """The manifest of ``root``; ``None`` when there is none (no complete dataset there yet)."""
    path = root / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            raise DatasetError(f"{path} is not a taskforge dataset manifest (format={data.get('format')!r})")
        return Manifest.from_dict(data)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DatasetError(f"{path} is unreadable ({type(exc).__name__}: {exc}); "
                           "regenerate the dataset or restore the file") from exc
