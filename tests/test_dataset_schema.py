"""Task -> parquet row -> Task is exact, and the prompt never carries the answer."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

from taskforge.core.errors import DatasetError
from taskforge.core.task import Task
from taskforge.dataset.schema import (
    PROMPT_COLUMNS,
    ROW_SCHEMA,
    SCHEMA_VERSION,
    SWEBENCH_COLUMNS,
    row_to_task,
    rows_to_table,
    task_to_row,
)
from tests.strategies import sample_task, tasks


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tasks)
def test_task_row_task_round_trip_through_parquet(task: Task) -> None:
    buf = pa.BufferOutputStream()
    pq.write_table(rows_to_table([task_to_row(task)]), buf, compression="zstd")
    (row,) = pq.read_table(pa.BufferReader(buf.getvalue())).to_pylist()
    assert row_to_task(row) == task
    assert row["content_hash"] == task.content_hash


@settings(max_examples=60, deadline=None)
@given(tasks)
def test_prompt_columns_never_hold_tests_or_gold(task: Task) -> None:
    row = task_to_row(task)
    prompt_text = json.dumps([row[c] for c in PROMPT_COLUMNS], ensure_ascii=False)
    for secret in (task.patch, task.test_patch, *task.fail_to_pass):
        if len(secret) >= 8 and secret not in task.problem_statement:
            assert secret not in prompt_text


def test_rl_columns_have_verl_layout() -> None:
    task = sample_task(3)
    row = task_to_row(task, split="test")
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert task.problem_statement in row["prompt"][1]["content"]
    assert row["reward_model"] == {"style": "rule", "ground_truth": task.instance_id}
    assert row["ability"] == "coding"
    info = json.loads(row["extra_info"])
    assert info == {"instance_id": task.instance_id, "repo": "demo", "strategy": "delete",
                    "difficulty": task.difficulty.score, "tier": task.difficulty.tier, "split": "test"}
    assert json.loads(row["FAIL_TO_PASS"]) == list(task.fail_to_pass)  # SWE-bench: JSON-encoded list
    assert ROW_SCHEMA.field("prompt").type == pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    assert set(SWEBENCH_COLUMNS) <= set(ROW_SCHEMA.names)
    assert ROW_SCHEMA.metadata[b"taskforge.schema_version"] == str(SCHEMA_VERSION).encode()


def test_row_with_edited_patch_is_rejected_by_content_hash() -> None:
    row = task_to_row(sample_task(1))
    row["patch"] = row["patch"] + "+evil\n"
    with pytest.raises(DatasetError, match="content_hash"):
        row_to_task(row)


def test_row_missing_a_column_is_a_one_line_dataset_error() -> None:
    row = task_to_row(sample_task(1))
    del row["env_spec"]
    with pytest.raises(DatasetError) as info:
        row_to_task(row)
    assert "\n" not in str(info.value) and "schema v1" in str(info.value)


def test_documented_schema_matches_the_code() -> None:
    from pathlib import Path

    doc = json.loads((Path(__file__).resolve().parents[1] / "datasets" / "task_schema.json").read_text())
    assert doc["schema_version"] == SCHEMA_VERSION
    assert [(c["name"], c["arrow_type"]) for c in doc["columns"]] == [(f.name, str(f.type)) for f in ROW_SCHEMA]
    assert {c["name"] for c in doc["columns"] if c["visible_to_policy"]} == set(PROMPT_COLUMNS)
    assert {c["name"] for c in doc["columns"] if c["group"] == "swebench"} == set(SWEBENCH_COLUMNS)
    assert all(c["description"] for c in doc["columns"])
