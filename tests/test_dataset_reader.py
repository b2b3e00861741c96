"""Reading a dataset: pyarrow.dataset, Hugging Face datasets, filters, and integrity checks."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from taskforge.core.errors import DatasetError
from taskforge.dataset import Dataset, load_tasks, task_filter, write_tasks
from taskforge.dataset.manifest import MANIFEST
from tests.strategies import sample_task


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    tasks = [sample_task(i, repo="alpha" if i % 2 else "beta", score=i / 10) for i in range(10)]
    write_tasks(root, tasks, tasks_per_shard=4, row_group_size=2)
    return root


def test_shards_load_with_pyarrow_dataset(dataset_dir: Path) -> None:
    table = pads.dataset(dataset_dir / "data", format="parquet").to_table()
    assert table.num_rows == 10
    assert sorted(table.column("instance_id").to_pylist()) == sorted(sample_task(i, repo="alpha" if i % 2 else "beta").instance_id
                                                               for i in range(10))
    row = table.slice(0, 1).to_pylist()[0]
    assert row["reward_model"]["style"] == "rule" and row["prompt"][0]["role"] == "system"


def test_shards_load_with_hugging_face_datasets(dataset_dir: Path) -> None:
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("parquet", data_files=str(dataset_dir / "data" / "shard-*.parquet"), split="train",
                               cache_dir=str(dataset_dir.parent / "hf-cache"))
    assert ds.num_rows == 10
    first = ds[0]
    assert first["reward_model"]["ground_truth"] == first["instance_id"]
    assert json.loads(first["extra_info"])["instance_id"] == first["instance_id"]
    assert isinstance(first["prompt"], list) and first["prompt"][1]["role"] == "user"
    # the generated card's front matter makes the directory itself loadable
    whole = datasets.load_dataset(str(dataset_dir), split="train", cache_dir=str(dataset_dir.parent / "hf-cache2"))
    assert sorted(whole["instance_id"]) == sorted(ds["instance_id"])


def test_filters_push_down_and_tasks_round_trip(dataset_dir: Path) -> None:
    alpha = load_tasks(dataset_dir, repo="alpha", min_score=0.45)
    assert sorted(t.instance_id for t in alpha) == sorted(sample_task(i, repo="alpha").instance_id for i in (5, 7, 9))
    ds = Dataset.open(dataset_dir)
    one = ds.get(sample_task(4, repo="beta").instance_id)
    assert one == sample_task(4, repo="beta", score=0.4)
    assert len(ds.tasks(task_filter(tier=0))) == len([i for i in range(10) if i % 3 == 0])


def test_unknown_instance_id_is_a_dataset_error_with_a_hint(dataset_dir: Path) -> None:
    with pytest.raises(DatasetError, match="no task 'func3'.*similar: "):
        Dataset.open(dataset_dir).get("func3")


def test_truncated_shard_is_detected_on_load(dataset_dir: Path) -> None:
    shard = dataset_dir / "data" / "shard-00001.parquet"
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(DatasetError) as info:
        Dataset.open(dataset_dir)
    msg = str(info.value)
    assert "\n" not in msg and "shard-00001.parquet" in msg and "truncated" in msg


def test_flipped_byte_is_detected_by_sha256(dataset_dir: Path) -> None:
    shard = dataset_dir / "data" / "shard-00000.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=r"sha256 .*\(corrupted\)"):
        Dataset.open(dataset_dir)


def test_missing_directory_manifest_and_other_schema_version(tmp_path: Path, dataset_dir: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        Dataset.open(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no manifest.json"):
        Dataset.open(tmp_path / "empty")
    manifest = json.loads((dataset_dir / MANIFEST).read_text())
    manifest["schema_version"] = 99
    (dataset_dir / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match="schema v99"):
        Dataset.open(dataset_dir)


def test_unlisted_shard_of_a_killed_run_is_not_read(dataset_dir: Path) -> None:
    extra = dataset_dir / "data" / "shard-00009.parquet"
    extra.write_bytes((dataset_dir / "data" / "shard-00000.parquet").read_bytes())
    assert len(Dataset.open(dataset_dir).instance_ids()) == 10
