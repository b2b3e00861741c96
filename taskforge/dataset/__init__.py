"""The on-disk task dataset: parquet shards + manifest + repo archives + card, and its exports.

    from taskforge.dataset import Dataset, DatasetWriter
    with DatasetWriter("datasets/out/demo", tasks_per_shard=256) as w:
        w.add_repo_archive(repo, base_commit, checkout_dir)
        w.add(task)                       # False when a duplicate (instance id or content hash)
    ds = Dataset.open("datasets/out/demo")   # verifies every shard against manifest.json

Layout and guarantees: ``manifest.py`` (layout), ``writer.py`` (atomicity, resume, de-duplication),
``schema.py`` (columns). Exports: ``export_harbor``, ``export_swebench``, ``export_verl``.
"""

from taskforge.dataset.calibration import Calibration, read_calibration, write_calibration
from taskforge.dataset.funnel import FunnelTotals, RunFunnel, read_funnel, record_run
from taskforge.dataset.manifest import FileEntry, Manifest, read_manifest
from taskforge.dataset.reader import Dataset, iter_tasks, load_tasks, task_filter
from taskforge.dataset.repos import broken_workspace, extract_original, repo_archive_path
from taskforge.dataset.schema import ROW_SCHEMA, SCHEMA_VERSION, prompt_messages, row_to_task, task_to_row
from taskforge.dataset.writer import DatasetWriter, write_tasks

__all__ = [
    "ROW_SCHEMA", "SCHEMA_VERSION", "Calibration", "Dataset", "DatasetWriter", "FileEntry", "FunnelTotals", "Manifest",
    "RunFunnel", "broken_workspace", "extract_original", "iter_tasks", "load_tasks",
    "prompt_messages", "read_calibration", "read_funnel", "read_manifest", "record_run", "repo_archive_path", "row_to_task",
    "task_filter", "task_to_row", "write_calibration", "write_tasks",
]
