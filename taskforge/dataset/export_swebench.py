"""Export tasks as SWE-bench rows: one JSON object per line with SWE-bench's columns and types.

``FAIL_TO_PASS``/``PASS_TO_PASS`` stay JSON-encoded lists (as in SWE-bench); ``setup_patch`` is
added (original -> broken workspace), and ``hints_text``/``environment_setup_commit`` are filled
so harnesses that expect the full SWE-bench row accept it.
"""

from __future__ import annotations

import json
from pathlib import Path

from taskforge.core.task import Task
from taskforge.dataset.manifest import write_bytes_atomic
from taskforge.dataset.reader import Dataset
from taskforge.dataset.schema import SWEBENCH_COLUMNS, task_to_row

FILENAME = "tasks.jsonl"


def swebench_row(task: Task) -> dict[str, str]:
    row = task_to_row(task)
    out = {c: row[c] for c in SWEBENCH_COLUMNS}
    out["hints_text"] = ""
    out["environment_setup_commit"] = task.base_commit
    return out


def export_swebench(ds: Dataset, out: Path, tasks: list[Task] | None = None) -> Path:
    """Write ``out/tasks.jsonl`` (atomically); returns its path."""
    chosen = ds.tasks() if tasks is None else tasks
    lines = [json.dumps(swebench_row(t), ensure_ascii=False) for t in sorted(chosen, key=lambda t: t.instance_id)]
    path = Path(out) / FILENAME
    write_bytes_atomic(path, ("\n".join(lines) + ("\n" if lines else "")).encode())
    return path
