"""The calibrated-difficulty column of a dataset: ``DIR/calibration.parquet``, one row per calibrated task.

    write_calibration(root, {"id": Calibration(1.3, 64)}, source="calibrate:simulated")
    read_calibration(root)   # {"id": Calibration(difficulty=1.3, observations=64, source=..., at=...)}

Why a file next to the shards and not a rewrite of them: the value is *derived* from outcomes, changes
with every calibration, and must never change a task row (or its content hash, or the shard digests
the manifest pins). One parquet file replaced atomically is crash-safe where rewriting a set of
shards and the manifest is not. ``Dataset.table`` joins it onto the rows as the columns
``schema.CALIBRATION_COLUMNS`` (null where a task has none), so readers see one table; datasets
without the file read exactly as before. A new calibration replaces the entries of the tasks it
fitted and keeps the others; entries of instance ids the dataset does not hold are ignored on read.
Concurrent writers serialise on ``DIR/.calibration.lock``.
"""

from __future__ import annotations

import fcntl
import io
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from taskforge.core.errors import DatasetError
from taskforge.core.files import write_atomic
from taskforge.dataset.schema import CALIBRATION_SCHEMA

CALIBRATION_FILE = "calibration.parquet"


@dataclass(frozen=True, slots=True)
class Calibration:
    """One task's calibrated difficulty (Rasch logits) and how many graded rollouts it came from."""

    difficulty: float
    observations: int
    source: str = ""
    at: str = ""


def read_calibration(root: Path | str) -> dict[str, Calibration]:
    """Instance id -> ``Calibration`` for ``root``; empty when the dataset was never calibrated."""
    path = Path(root) / CALIBRATION_FILE
    if not path.is_file():
        return {}
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise DatasetError(f"{path} is unreadable ({exc}); delete it and calibrate again") from exc
    return {r["instance_id"]: Calibration(float(r["calibrated_difficulty"]), int(r["calibration_observations"]),
                                          r.get("calibration_source") or "", r.get("calibrated_at") or "")
            for r in rows}


def write_calibration(root: Path | str, values: Mapping[str, Calibration], *, source: str) -> int:
    """Merge ``values`` into ``root``'s calibration (replacing those tasks' entries); returns rows written."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"dataset directory {root} does not exist; calibrate a `taskforge generate` output")
    now = datetime.now(UTC).replace(microsecond=0).isoformat()
    with open(root / ".calibration.lock", "w") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        merged = read_calibration(root)
        merged.update({k: Calibration(float(v.difficulty), int(v.observations), v.source or source, v.at or now)
                       for k, v in values.items()})
        table = pa.Table.from_pylist(
            [{"instance_id": k, "calibrated_difficulty": c.difficulty, "calibration_observations": c.observations,
              "calibration_source": c.source, "calibrated_at": c.at} for k, c in sorted(merged.items())],
            schema=CALIBRATION_SCHEMA)
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        write_atomic(root / CALIBRATION_FILE, buf.getvalue(), durable=True)
    return len(merged)


def with_calibration(root: Path, table: pa.Table, *, always: bool = False) -> pa.Table:
    """``table`` (task rows with ``instance_id``) plus the calibration columns when ``root`` has any
    (``always``: even when it has none, as all-null columns)."""
    cal = read_calibration(root)
    if (not cal and not always) or "instance_id" not in table.column_names:
        return table
    ids = table.column("instance_id").to_pylist()
    got = [cal.get(i) for i in ids]
    table = table.append_column("calibrated_difficulty",
                                pa.array([c.difficulty if c else None for c in got], pa.float64()))
    return table.append_column("calibration_observations",
                               pa.array([c.observations if c else None for c in got], pa.int64()))
