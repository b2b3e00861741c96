"""``DatasetWriter``: append tasks to a dataset directory, crash-safely, without duplicates.

Guarantees (each one tested, see ``tests/test_dataset_writer.py``):

* A shard is written to ``data/shard-NNNNN.parquet.tmp``, fsynced and renamed: a reader never sees a
  partial shard, and a process killed at any point leaves only whole shards (plus a ``.tmp`` that the
  next writer deletes).
* ``manifest.json`` is written by ``close()`` only, after every shard and archive: its presence
  means the set it lists is complete. Readers read only listed shards.
* Opening a directory continues it: listed shards and whole shards a killed run left unlisted are
  adopted, and their instance ids and content hashes seed the de-duplication, so running a killed
  generation again resumes it without duplicating a task. ``add`` drops a task whose instance id or
  content hash is already present (returns ``False``).
* Shards hold ``tasks_per_shard`` tasks each (the last one fewer), in arrival order, sorted by
  instance id inside the shard; ``add_all`` sorts its input first, so the same task set always
  produces byte-identical shards. zstd compression and the row-group size are explicit.
* One writer per directory at a time (an ``fcntl`` lock on ``DIR/.lock``, released even on SIGKILL).
"""

from __future__ import annotations

import fcntl
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import pyarrow.parquet as pq

import taskforge
from taskforge.core.errors import DatasetError
from taskforge.core.task import Task
from taskforge.dataset.funnel import RunFunnel, record_run
from taskforge.dataset.manifest import (
    DATA_DIR,
    REPOS_DIR,
    SHARD_GLOB,
    FileEntry,
    Manifest,
    commit_file,
    read_manifest,
)
from taskforge.dataset.repos import write_repo_archive
from taskforge.dataset.schema import ROW_SCHEMA, SCHEMA_VERSION, rows_to_table, task_to_row

DEFAULT_TASKS_PER_SHARD = 256
DEFAULT_ROW_GROUP_SIZE = 32
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 3


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _shard_index(path: Path) -> int:
    return int(path.name.split("-", 1)[1].split(".", 1)[0])


class DatasetWriter:
    """Writes tasks into ``root`` (created if needed); use as a context manager or call ``close()``."""

    def __init__(self, root: Path | str, *, tasks_per_shard: int = DEFAULT_TASKS_PER_SHARD,
                 row_group_size: int = DEFAULT_ROW_GROUP_SIZE, split: str = "train",
                 write_card: bool = True) -> None:
        if tasks_per_shard < 1 or row_group_size < 1:
            raise DatasetError(f"tasks_per_shard and row_group_size must be >= 1 "
                               f"(got {tasks_per_shard}, {row_group_size})")
        self.root = Path(root)
        self.tasks_per_shard = tasks_per_shard
        self.row_group_size = row_group_size
        self.split = split
        self.write_card = write_card
        self.added = 0
        self.duplicates = 0
        self._pending: list[Task] = []
        self._shards: list[FileEntry] = []
        self._archives: dict[str, FileEntry] = {}
        self._ids: set[str] = set()
        self._hashes: set[str] = set()
        self._counts: dict[str, Counter[str]] = {"by_repo": Counter(), "by_strategy": Counter(),
                                                 "by_tier": Counter()}
        self._closed = False
        self._lock: IO[str] | None = None
        self._open()

    # -- opening / resuming -------------------------------------------------------------------
    def _open(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise DatasetError(f"dataset path {self.root} exists and is not a directory; pick another --out")
        (self.root / DATA_DIR).mkdir(parents=True, exist_ok=True)
        self._lock = open(self.root / ".lock", "w")
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise DatasetError(f"another taskforge process is writing {self.root} (lock {self.root}/.lock held); "
                               "wait for it or write elsewhere") from None
        for leftover in list((self.root / DATA_DIR).glob("*.tmp")) + list((self.root / REPOS_DIR).glob("*.tmp")):
            leftover.unlink()
        manifest = read_manifest(self.root)
        self._manifest = manifest
        if manifest is not None:
            if manifest.schema_version != SCHEMA_VERSION:
                raise DatasetError(f"dataset {self.root} has schema v{manifest.schema_version}, this taskforge "
                                   f"writes v{SCHEMA_VERSION}; write to a new directory")
            self.duplicates_before = int(manifest.counts.get("duplicates_dropped", 0))
            for listed_entry in manifest.shards:
                listed_entry.verify(self.root)
            self._archives = {a.path: a for a in manifest.archives}
        else:
            self.duplicates_before = 0
        listed = {e.path: e for e in (manifest.shards if manifest else ())}
        for path in sorted((self.root / DATA_DIR).glob(SHARD_GLOB), key=_shard_index):
            rel = path.relative_to(self.root).as_posix()
            entry: FileEntry | None = listed.get(rel)
            try:
                table = pq.read_table(path, columns=["instance_id", "content_hash", "repo", "strategy",
                                                     "difficulty_tier"])
            except Exception as exc:  # pyarrow raises several types for a damaged file
                raise DatasetError(f"shard {path} is unreadable ({exc}); delete it and run again") from exc
            if entry is None:  # whole shard of a run that was killed before its manifest
                entry = FileEntry.of(self.root, path, rows=table.num_rows)
            self._shards.append(entry)
            self._account(table.to_pylist())
        for path in sorted((self.root / REPOS_DIR).glob("*.tar.gz")):
            rel = path.relative_to(self.root).as_posix()
            if rel not in self._archives:
                repo, _, commit = path.name[: -len(".tar.gz")].rpartition("-")
                self._archives[rel] = FileEntry.of(self.root, path, repo=repo, base_commit=commit)

    def _account(self, rows: Iterable[dict[str, Any]]) -> None:
        for r in rows:
            self._ids.add(r["instance_id"])
            self._hashes.add(r["content_hash"])
            self._counts["by_repo"][r["repo"]] += 1
            self._counts["by_strategy"][r["strategy"]] += 1
            self._counts["by_tier"][str(r["difficulty_tier"])] += 1

    # -- adding ---------------------------------------------------------------------------------
    def __contains__(self, instance_id: object) -> bool:
        return instance_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, task: Task) -> bool:
        """Queue ``task``; ``False`` (and counted in ``duplicates``) when it is already in the dataset."""
        self._check_open()
        if task.instance_id in self._ids or task.content_hash in self._hashes:
            self.duplicates += 1
            return False
        self._account([{"instance_id": task.instance_id, "content_hash": task.content_hash, "repo": task.repo,
                        "strategy": task.strategy, "difficulty_tier": task.difficulty.tier}])
        self._pending.append(task)
        self.added += 1
        if len(self._pending) >= self.tasks_per_shard:
            self.flush()
        return True

    def add_all(self, tasks: Iterable[Task]) -> int:
        """Add many tasks in instance-id order (deterministic shards); returns how many were new."""
        return sum(self.add(t) for t in sorted(tasks, key=lambda t: t.instance_id))

    def add_repo_archive(self, repo: str, base_commit: str, src_dir: Path) -> FileEntry:
        """Store the original tree of ``(repo, base_commit)`` (once) so the dataset is self-contained."""
        self._check_open()
        entry = write_repo_archive(self.root, repo, base_commit, src_dir)
        self._archives[entry.path] = entry
        return entry

    def record_run(self, run: RunFunnel) -> None:
        """Record a run's rejection funnel in ``DIR/funnel.json`` (replacing it when the run resumes)."""
        record_run(self.root, run)

    def flush(self) -> None:
        """Write queued tasks as one shard (atomically). Called every ``tasks_per_shard`` tasks."""
        if not self._pending:
            return
        batch = sorted(self._pending, key=lambda t: t.instance_id)
        index = max((_shard_index(Path(s.path)) for s in self._shards), default=-1) + 1
        final = self.root / DATA_DIR / f"shard-{index:05d}.parquet"
        tmp = final.with_name(final.name + ".tmp")
        table = rows_to_table([task_to_row(t, self.split) for t in batch])
        pq.write_table(table, tmp, row_group_size=self.row_group_size, compression=COMPRESSION,
                       compression_level=COMPRESSION_LEVEL, write_statistics=True, store_schema=True)
        commit_file(tmp, final)
        self._shards.append(FileEntry.of(self.root, final, rows=len(batch)))
        self._pending.clear()

    # -- closing --------------------------------------------------------------------------------
    def close(self) -> Manifest:
        """Flush, write the manifest (last of all data), then the dataset card; release the lock."""
        self._check_open()
        try:
            self.flush()
            now = _now()
            counts = {
                "tasks": sum(s.rows for s in self._shards),
                "shards": len(self._shards),
                "archives": len(self._archives),
                "duplicates_dropped": self.duplicates_before + self.duplicates,
                **{k: dict(sorted(c.items())) for k, c in self._counts.items()},
            }
            manifest = Manifest(
                schema_version=SCHEMA_VERSION,
                taskforge_version=taskforge.__version__,
                created_at=self._manifest.created_at if self._manifest else now,
                updated_at=now,
                counts=counts,
                shards=tuple(self._shards),
                archives=tuple(sorted(self._archives.values(), key=lambda a: a.path)),
                options={"tasks_per_shard": self.tasks_per_shard, "row_group_size": self.row_group_size,
                         "compression": COMPRESSION, "compression_level": COMPRESSION_LEVEL,
                         "columns": ROW_SCHEMA.names},
            )
            manifest.write(self.root)
            if self.write_card:
                from taskforge.dataset.card import write_card

                write_card(self.root)
            return manifest
        finally:
            self._release()

    def abort(self) -> None:
        """Keep whole shards written so far (a later writer resumes from them); write no manifest."""
        if not self._closed:
            try:
                self.flush()
            finally:
                self._release()

    def _release(self) -> None:
        self._closed = True
        if self._lock is not None:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _check_open(self) -> None:
        if self._closed:
            raise DatasetError(f"writer of {self.root} is closed; open a new DatasetWriter to add tasks")

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._closed:
            return
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        return f"DatasetWriter({str(self.root)!r}, tasks={len(self._ids)}, pending={len(self._pending)})"


def write_tasks(root: Path | str, tasks: Iterable[Task], **options: Any) -> Manifest:
    """Write (or append) ``tasks`` to ``root`` in one go; returns the new manifest."""
    writer = DatasetWriter(root, **options)
    try:
        writer.add_all(tasks)
    except BaseException:
        writer.abort()
        raise
    return writer.close()
