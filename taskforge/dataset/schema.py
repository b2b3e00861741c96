"""The task-row schema (one parquet row per ``Task``) and the exact ``Task <-> row`` mapping.

Three groups of columns live side by side in one row (documented in ``datasets/task_schema.json``):

* SWE-bench columns, with SWE-bench's types: ``FAIL_TO_PASS``/``PASS_TO_PASS`` are JSON-encoded
  lists of strings, everything else a plain string. Plus ``setup_patch`` (original -> broken).
* RL-trainer columns in the layout verl and SkyRL read: ``data_source``, ``prompt`` (chat messages),
  ``ability``, ``reward_model`` (``{style: "rule", ground_truth: instance_id}``), ``extra_info``
  (a JSON-encoded string, so rows of any shape concatenate across shards).
* taskforge columns: everything else a ``Task`` holds, so that ``row_to_task(task_to_row(t)) == t``.

The prompt is built from the problem statement only: the hidden tests, their names and the gold
patch never reach it (``prompt_messages``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from taskforge.core.environment import EnvSpec
from taskforge.core.errors import DatasetError
from taskforge.core.task import AuditResult, Difficulty, Task, ValidationRun

SCHEMA_VERSION = 1
DATA_SOURCE = "taskforge"
ABILITY = "coding"

SYSTEM_PROMPT = (
    "You are an expert software engineer working in a Python repository checked out in your "
    "working directory. A feature of the repository has been removed. Re-implement it so that the "
    "repository behaves as described. Change only the library's source code: do not add, edit or "
    "delete test files or test configuration. When you are done, the project's test suite is run."
)

_DIFFICULTY_TYPE = pa.struct([
    ("tier", pa.int64()),
    ("lines_deleted", pa.int64()),
    ("statements_deleted", pa.int64()),
    ("entities_deleted", pa.int64()),
    ("complexity", pa.int64()),
    ("fan_in", pa.int64()),
    ("fan_out", pa.int64()),
    ("files_touched", pa.int64()),
    ("fail_to_pass", pa.int64()),
    ("score", pa.float64()),
])

# Order matters only for readability: SWE-bench columns, RL columns, taskforge columns.
ROW_SCHEMA = pa.schema(
    [
        # SWE-bench
        ("instance_id", pa.string()),
        ("repo", pa.string()),
        ("base_commit", pa.string()),
        ("patch", pa.string()),
        ("test_patch", pa.string()),
        ("problem_statement", pa.string()),
        ("FAIL_TO_PASS", pa.string()),  # JSON list of node ids
        ("PASS_TO_PASS", pa.string()),  # JSON list of node ids
        ("version", pa.string()),
        ("created_at", pa.string()),
        ("image_name", pa.string()),
        ("setup_patch", pa.string()),
        # RL trainers (verl / SkyRL)
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.string()),  # JSON object
        # taskforge
        ("source", pa.string()),
        ("strategy", pa.string()),
        ("entities", pa.list_(pa.string())),
        ("difficulty", _DIFFICULTY_TYPE),
        ("difficulty_score", pa.float64()),
        ("difficulty_tier", pa.int64()),
        ("env_spec", pa.string()),  # JSON object (EnvSpec.to_dict)
        ("env_frozen", pa.list_(pa.string())),
        ("validation", pa.string()),  # JSON list of ValidationRun.to_dict
        ("audit", pa.string()),  # JSON object (AuditResult.to_dict)
        ("audit_passed", pa.bool_()),
        ("provenance", pa.string()),  # JSON object
        ("content_hash", pa.string()),
    ],
    metadata={b"taskforge.schema_version": str(SCHEMA_VERSION).encode()},
)

SWEBENCH_COLUMNS = (
    "instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",
    "FAIL_TO_PASS", "PASS_TO_PASS", "version", "created_at", "image_name", "setup_patch",
)
RL_COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
# Columns a policy may be shown. Everything else (patches, tests, validation) is for graders only.
PROMPT_COLUMNS = ("prompt", "problem_statement")


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def prompt_messages(task: Task) -> list[dict[str, str]]:
    """The chat a policy is prompted with: a system message and the problem statement, nothing else."""
    user = (
        f"Repository: {task.repo} (version {task.version})\n\n"
        f"{task.problem_statement.rstrip()}\n"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def extra_info(task: Task, split: str = "train", index: int | None = None) -> dict[str, Any]:
    """The flat record verl passes to reward functions; JSON-encoded in the row."""
    info: dict[str, Any] = {
        "instance_id": task.instance_id,
        "repo": task.repo,
        "strategy": task.strategy,
        "difficulty": task.difficulty.score,
        "tier": task.difficulty.tier,
        "split": split,
    }
    if index is not None:
        info["index"] = index
    return info


def task_to_row(task: Task, split: str = "train") -> dict[str, Any]:
    """One parquet row (a dict of ``ROW_SCHEMA`` columns) holding every field of ``task``."""
    return {
        "instance_id": task.instance_id,
        "repo": task.repo,
        "base_commit": task.base_commit,
        "patch": task.patch,
        "test_patch": task.test_patch,
        "problem_statement": task.problem_statement,
        "FAIL_TO_PASS": _dumps(list(task.fail_to_pass)),
        "PASS_TO_PASS": _dumps(list(task.pass_to_pass)),
        "version": task.version,
        "created_at": task.created_at,
        "image_name": task.image_name,
        "setup_patch": task.setup_patch,
        "data_source": DATA_SOURCE,
        "prompt": prompt_messages(task),
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": task.instance_id},
        "extra_info": _dumps(extra_info(task, split)),
        "source": task.source,
        "strategy": task.strategy,
        "entities": list(task.entities),
        "difficulty": task.difficulty.to_dict(),
        "difficulty_score": task.difficulty.score,
        "difficulty_tier": task.difficulty.tier,
        "env_spec": _dumps(task.env_spec.to_dict()),
        "env_frozen": list(task.env_frozen),
        "validation": _dumps([v.to_dict() for v in task.validation]),
        "audit": _dumps(task.audit.to_dict()),
        "audit_passed": task.audit.passed,
        "provenance": _dumps(dict(task.provenance)),
        "content_hash": task.content_hash,
    }


def row_to_task(row: Mapping[str, Any]) -> Task:
    """The ``Task`` a row was made from. Raises ``DatasetError`` for a row of another shape."""
    try:
        task = Task(
            instance_id=row["instance_id"],
            repo=row["repo"],
            source=row["source"],
            base_commit=row["base_commit"],
            version=row["version"],
            created_at=row["created_at"],
            strategy=row["strategy"],
            entities=tuple(row["entities"] or ()),
            setup_patch=row["setup_patch"],
            patch=row["patch"],
            test_patch=row["test_patch"],
            problem_statement=row["problem_statement"],
            fail_to_pass=tuple(json.loads(row["FAIL_TO_PASS"])),
            pass_to_pass=tuple(json.loads(row["PASS_TO_PASS"])),
            env_spec=EnvSpec.from_dict(json.loads(row["env_spec"])),
            difficulty=Difficulty.from_dict(row["difficulty"]),
            env_frozen=tuple(row["env_frozen"] or ()),
            image_name=row["image_name"],
            validation=tuple(ValidationRun.from_dict(v) for v in json.loads(row["validation"])),
            audit=AuditResult.from_dict(json.loads(row["audit"])),
            provenance=json.loads(row["provenance"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        ident = row.get("instance_id", "?") if isinstance(row, Mapping) else "?"
        raise DatasetError(
            f"row {ident!r} does not match task schema v{SCHEMA_VERSION} ({type(exc).__name__}: {exc}); "
            "re-export the dataset with this taskforge version"
        ) from exc
    stored = row.get("content_hash")
    if stored and stored != task.content_hash:
        raise DatasetError(
            f"row {task.instance_id!r}: stored content_hash {stored} != recomputed {task.content_hash}; "
            "the row was edited or corrupted, regenerate it"
        )
    return task


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ROW_SCHEMA)

# Calibrated difficulty (optional, ``taskforge.dataset.calibration``): fitted from observed outcomes by
# ``taskforge calibrate`` or a training run, kept next to the shards in ``DIR/calibration.parquet`` keyed by
# instance id, and joined onto the rows as these columns by ``Dataset.table``. A dataset without it reads
# as before (``Dataset.calibration()`` is empty); the task rows and their content hashes never change.
CALIBRATION_COLUMNS = ("calibrated_difficulty", "calibration_observations")
CALIBRATION_SCHEMA = pa.schema([
    ("instance_id", pa.string()),
    ("calibrated_difficulty", pa.float64()),  # Rasch difficulty b: P(pass) = sigmoid(skill - b), logits
    ("calibration_observations", pa.int64()),  # graded rollouts the value was fitted from
    ("calibration_source", pa.string()),  # what produced it: "calibrate:simulated", "train:hf", ...
    ("calibrated_at", pa.string()),  # ISO 8601 UTC
])
