"""Export the RL columns as the parquet files verl (``RLHFDataset``) and SkyRL read.

Columns: ``data_source``, ``prompt`` (chat messages), ``ability``, ``reward_model``
(``{style: "rule", ground_truth: instance_id}``) and ``extra_info`` as a struct (one fixed shape
here, so trainers get a dict: instance id, repo, strategy, difficulty, tier, split, index).
Nothing else: no patch, no test, no validation record can reach a policy from these files.

An optional validation split is chosen by a seeded hash of the instance id (reproducible, and a
task stays in its split when the dataset grows).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from taskforge.core.errors import DatasetError
from taskforge.core.task import Task
from taskforge.dataset.manifest import commit_file
from taskforge.dataset.reader import Dataset
from taskforge.dataset.schema import ROW_SCHEMA, extra_info, prompt_messages

EXTRA_INFO_TYPE = pa.struct([("instance_id", pa.string()), ("repo", pa.string()), ("strategy", pa.string()),
                             ("difficulty", pa.float64()), ("tier", pa.int64()), ("split", pa.string()),
                             ("index", pa.int64())])
VERL_SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", ROW_SCHEMA.field("prompt").type),
    ("ability", pa.string()),
    ("reward_model", ROW_SCHEMA.field("reward_model").type),
    ("extra_info", EXTRA_INFO_TYPE),
])


def split_of(instance_id: str, val_fraction: float, seed: int) -> str:
    """``"test"`` for about ``val_fraction`` of instance ids (seeded, stable), else ``"train"``."""
    h = int.from_bytes(hashlib.sha256(f"{seed}:{instance_id}".encode()).digest()[:8], "big")
    return "test" if h / 2**64 < val_fraction else "train"


def verl_rows(tasks: list[Task], split: str) -> list[dict[str, object]]:
    return [{"data_source": "taskforge", "prompt": prompt_messages(t), "ability": "coding",
             "reward_model": {"style": "rule", "ground_truth": t.instance_id},
             "extra_info": extra_info(t, split, index=i)} for i, t in enumerate(tasks)]


def export_verl(ds: Dataset, out: Path, *, val_fraction: float = 0.0, seed: int = 0,
                tasks: list[Task] | None = None) -> list[Path]:
    """Write ``out/train.parquet`` (and ``out/test.parquet`` when ``val_fraction > 0``)."""
    if not 0.0 <= val_fraction < 1.0:
        raise DatasetError(f"val_fraction must be in [0, 1) (got {val_fraction})")
    chosen = sorted(ds.tasks() if tasks is None else tasks, key=lambda t: t.instance_id)
    by_split: dict[str, list[Task]] = {"train": [], "test": []}
    for t in chosen:
        by_split[split_of(t.instance_id, val_fraction, seed)].append(t)
    Path(out).mkdir(parents=True, exist_ok=True)
    written = []
    for split, items in by_split.items():
        if split == "test" and val_fraction == 0.0:
            continue
        path = Path(out) / f"{split}.parquet"
        tmp = path.with_name(path.name + ".tmp")
        pq.write_table(pa.Table.from_pylist(verl_rows(items, split), schema=VERL_SCHEMA), tmp,
                       compression="zstd", row_group_size=256)
        commit_file(tmp, path)
        written.append(path)
    return written
