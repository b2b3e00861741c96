"""Read a dataset directory: verify it against its manifest, load, filter and iterate tasks.

    ds = Dataset.open("datasets/out/demo")             # DatasetError unless complete and intact
    for task in ds.iter_tasks(task_filter(repo="inflection", min_score=0.3)):
        ...

Only shards listed in ``manifest.json`` are read (a killed writer's unlisted shards are not part of
the dataset until a writer resumes and closes). ``verify=True`` checks every shard's size and sha256.
Filters are pyarrow expressions, pushed down into the parquet scan.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from taskforge.core.errors import DatasetError
from taskforge.core.task import Task
from taskforge.dataset.manifest import FUNNEL, MANIFEST, FileEntry, Manifest, read_manifest
from taskforge.dataset.repos import broken_workspace, extract_original, repo_archive_path
from taskforge.dataset.schema import CALIBRATION_COLUMNS, ROW_SCHEMA, SCHEMA_VERSION, row_to_task

if TYPE_CHECKING:
    import pyarrow.dataset as pads

    from taskforge.dataset.calibration import Calibration


def task_filter(*, repo: str | None = None, strategy: str | None = None, tier: int | None = None,
                min_score: float | None = None, max_score: float | None = None,
                instance_ids: Iterable[str] | None = None) -> pc.Expression | None:
    """A pyarrow filter over task rows from the given conditions (all must hold); ``None`` = all rows."""
    parts: list[pc.Expression] = []
    if repo is not None:
        parts.append(pc.field("repo") == repo)
    if strategy is not None:
        parts.append(pc.field("strategy") == strategy)
    if tier is not None:
        parts.append(pc.field("difficulty_tier") == tier)
    if min_score is not None:
        parts.append(pc.field("difficulty_score") >= min_score)
    if max_score is not None:
        parts.append(pc.field("difficulty_score") <= max_score)
    if instance_ids is not None:
        parts.append(pc.field("instance_id").isin(list(instance_ids)))
    return reduce(lambda a, b: a & b, parts) if parts else None


class Dataset:
    """A complete dataset directory (its manifest exists and, when verified, every shard matches it)."""

    def __init__(self, root: Path, manifest: Manifest) -> None:
        self.root = root
        self.manifest = manifest

    @classmethod
    def open(cls, root: Path | str, *, verify: bool = True) -> Dataset:
        root = Path(root)
        if not root.is_dir():
            raise DatasetError(f"dataset directory {root} does not exist; pass the --out directory of a "
                               "`taskforge generate` run")
        manifest = read_manifest(root)
        if manifest is None:
            raise DatasetError(f"{root} has no {MANIFEST}: not a dataset, or its writer was killed before "
                               "finishing; run the generation again to resume it")
        if manifest.schema_version != SCHEMA_VERSION:
            raise DatasetError(f"dataset {root} has schema v{manifest.schema_version}; this taskforge reads "
                               f"v{SCHEMA_VERSION}; use a matching taskforge version or regenerate")
        if verify:
            for entry in manifest.shards:
                entry.verify(root)
        return cls(root, manifest)

    def __len__(self) -> int:
        return self.manifest.num_tasks

    def __repr__(self) -> str:
        return f"Dataset({str(self.root)!r}, tasks={len(self)}, shards={len(self.manifest.shards)})"

    @property
    def shard_paths(self) -> list[Path]:
        return [self.root / s.path for s in self.manifest.shards]

    def arrow(self) -> pads.Dataset:
        """The shards as one ``pyarrow.dataset.Dataset`` (lazy; use for scans and projections)."""
        import pyarrow.dataset as pads  # here, not at the top: it imports pandas (~0.5 s)

        return pads.dataset([str(p) for p in self.shard_paths], format="parquet", schema=ROW_SCHEMA)

    def table(self, columns: list[str] | None = None, where: pc.Expression | None = None) -> pa.Table:
        """Task rows (all columns, or ``columns``), plus the calibration columns when the dataset has any
        (``taskforge.dataset.calibration``; asked for by name, they are null where a task has none)."""
        from taskforge.dataset.calibration import with_calibration

        asked = [c for c in columns or () if c in CALIBRATION_COLUMNS]
        if not asked:
            return with_calibration(self.root, self._rows(columns, where)) if columns is None else \
                self._rows(columns, where)
        base = [c for c in columns or () if c not in CALIBRATION_COLUMNS]
        rows = self._rows(base if "instance_id" in base else [*base, "instance_id"], where)
        return with_calibration(self.root, rows, always=True).select(list(columns or ()))

    def calibration(self) -> dict[str, Calibration]:
        """Instance id -> calibrated difficulty and observation count, for this dataset's tasks only."""
        from taskforge.dataset.calibration import read_calibration

        cal = read_calibration(self.root)
        if not cal:
            return {}
        ids = set(self.instance_ids())
        return {k: v for k, v in cal.items() if k in ids}

    def _rows(self, columns: list[str] | None = None, where: pc.Expression | None = None) -> pa.Table:
        if not self.manifest.shards:
            return ROW_SCHEMA.empty_table().select(columns) if columns else ROW_SCHEMA.empty_table()
        if where is not None:
            return self.arrow().to_table(columns=columns, filter=where)
        # Whole shards need no dataset scanner: plain parquet reads keep `report` and `show` quick to start.
        return pa.concat_tables([pq.ParquetFile(p).read(columns=columns) for p in self.shard_paths])

    def iter_tasks(self, where: pc.Expression | None = None, batch_size: int = 64) -> Iterator[Task]:
        if not self.manifest.shards:
            return
        batches: Iterable[pa.RecordBatch] = (
            self.arrow().to_batches(filter=where, batch_size=batch_size) if where is not None
            else (b for p in self.shard_paths for b in pq.ParquetFile(p).iter_batches(batch_size=batch_size)))
        for batch in batches:
            for row in batch.to_pylist():
                yield row_to_task(row)

    def tasks(self, where: pc.Expression | None = None) -> list[Task]:
        return list(self.iter_tasks(where))

    def get(self, instance_id: str) -> Task:
        found = self.tasks(task_filter(instance_ids=[instance_id]))
        if not found:
            ids = self.instance_ids()
            near = [i for i in ids if instance_id in i][:3]
            hint = f"; similar: {', '.join(near)}" if near else f"; {len(ids)} tasks, see `taskforge show {self.root}`"
            raise DatasetError(f"no task {instance_id!r} in {self.root}{hint}")
        return found[0]

    def instance_ids(self) -> list[str]:
        return self._rows(columns=["instance_id"]).column("instance_id").to_pylist()

    def funnel(self) -> dict[str, Any] | None:
        path = self.root / FUNNEL
        return json.loads(path.read_text()) if path.is_file() else None

    # -- self-containment: rebuild workspaces from the dataset alone -------------------------------
    def archive_entry(self, task: Task) -> FileEntry | None:
        rel = repo_archive_path(self.root, task).relative_to(self.root).as_posix()
        return next((a for a in self.manifest.archives if a.path == rel), None)

    def extract_original(self, task: Task, dest: Path) -> Path:
        return extract_original(self.root, task, dest, self.archive_entry(task))

    def broken_workspace(self, task: Task, dest: Path) -> Path:
        return broken_workspace(self.root, task, dest, self.archive_entry(task))


def load_tasks(root: Path | str, **filters: Any) -> list[Task]:
    """All tasks of the dataset at ``root`` matching ``task_filter(**filters)``."""
    return Dataset.open(root).tasks(task_filter(**filters))


def iter_tasks(root: Path | str, **filters: Any) -> Iterator[Task]:
    return Dataset.open(root).iter_tasks(task_filter(**filters))
