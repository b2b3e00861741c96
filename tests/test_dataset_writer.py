"""DatasetWriter: atomic shards, manifest last, resume after SIGKILL, de-duplication, determinism."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from taskforge.core.errors import DatasetError
from taskforge.core.outcomes import Rejected, RejectReason
from taskforge.dataset import Dataset, DatasetWriter, RunFunnel, read_funnel, record_run, write_tasks
from taskforge.dataset.manifest import MANIFEST
from tests.strategies import sample_task

ROOT = Path(__file__).resolve().parents[1]


def test_shards_hold_tasks_per_shard_rows_with_explicit_row_groups_and_zstd(tmp_path: Path) -> None:
    manifest = write_tasks(tmp_path / "ds", [sample_task(i) for i in range(23)], tasks_per_shard=10,
                           row_group_size=4)
    assert [s.rows for s in manifest.shards] == [10, 10, 3]
    assert [s.path for s in manifest.shards] == [f"data/shard-0000{i}.parquet" for i in range(3)]
    meta = pq.ParquetFile(tmp_path / "ds" / manifest.shards[0].path).metadata
    assert meta.num_row_groups == 3  # 4 + 4 + 2
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert manifest.counts["tasks"] == 23 and manifest.counts["by_repo"] == {"demo": 23}
    data = json.loads((tmp_path / "ds" / MANIFEST).read_text())
    assert data["schema_version"] == 1 and data["taskforge_version"] == "0.1.0"
    assert all(len(s["sha256"]) == 64 for s in data["shards"])


def test_same_task_set_in_any_order_gives_byte_identical_shards(tmp_path: Path) -> None:
    tasks = [sample_task(i) for i in range(12)]
    a = write_tasks(tmp_path / "a", tasks, tasks_per_shard=5)
    b = write_tasks(tmp_path / "b", list(reversed(tasks)), tasks_per_shard=5)
    assert [(s.path, s.sha256) for s in a.shards] == [(s.path, s.sha256) for s in b.shards]
    first = pq.read_table(tmp_path / "a" / a.shards[0].path, columns=["instance_id"]).column(0).to_pylist()
    assert first == sorted(t.instance_id for t in tasks)[:5]


def test_append_drops_duplicates_by_instance_id_and_by_content_hash(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_tasks(root, [sample_task(i) for i in range(5)], tasks_per_shard=3)
    same_content_new_id = sample_task(2).__class__(**{
        **{f: getattr(sample_task(2), f) for f in sample_task(2).__dataclass_fields__},
        "instance_id": "renamed-but-same-content"})
    with DatasetWriter(root, tasks_per_shard=3) as w:
        assert w.add(sample_task(1)) is False  # same instance id
        assert w.add(same_content_new_id) is False  # same content hash
        assert w.add(sample_task(7)) is True
        assert w.add(sample_task(7)) is False  # duplicate inside one run
        assert "demo__delete__mod.func7-00000007" in w
    ds = Dataset.open(root)
    ids = ds.instance_ids()
    assert sorted(ids) == sorted(sample_task(i).instance_id for i in (0, 1, 2, 3, 4, 7))
    assert len(ids) == len(set(ids))
    assert ds.manifest.counts["duplicates_dropped"] == 3


def test_killed_writer_leaves_no_manifest_and_no_partial_shard(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    w = DatasetWriter(root, tasks_per_shard=2)
    for i in range(5):
        w.add(sample_task(i))
    # simulate a crash mid-write: a leftover temporary file, no close()
    (root / "data" / "shard-00002.parquet.tmp").write_bytes(b"PAR1 partial")
    w._release()  # the process "died": its lock is gone, nothing else ran
    assert not (root / MANIFEST).exists()
    with pytest.raises(DatasetError, match="no manifest.json"):
        Dataset.open(root)
    with DatasetWriter(root, tasks_per_shard=2) as w2:
        assert len(w2) == 4  # two whole shards adopted; the queued fifth task was lost
        assert not list((root / "data").glob("*.tmp"))
        assert w2.add_all(sample_task(i) for i in range(6)) == 2
    assert sorted(Dataset.open(root).instance_ids()) == sorted(sample_task(i).instance_id for i in range(6))


_CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from taskforge.dataset import DatasetWriter
from tests.strategies import sample_task
with DatasetWriter({out!r}, tasks_per_shard=3, row_group_size=2) as w:
    for i in range({n}):
        if w.add(sample_task(i, patch_bytes=20000)):
            time.sleep(0.02)
print("done", flush=True)
"""


@pytest.mark.parametrize("kill_after_shards", [1, 3])
def test_sigkilled_subprocess_then_resume_gives_complete_duplicate_free_dataset(
        tmp_path: Path, kill_after_shards: int) -> None:
    root, n = tmp_path / "ds", 20
    code = _CHILD.format(root=str(ROOT), out=str(root), n=n)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(list((root / "data").glob("shard-*.parquet"))) < kill_after_shards:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "child died"
            assert time.monotonic() < deadline, "child wrote no shard in 60 s"
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (root / MANIFEST).exists()
    for shard in (root / "data").glob("shard-*.parquet"):
        assert pq.read_metadata(shard).num_rows == 3  # every committed shard is whole
    # run the same generation again: it resumes
    resumed = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr.decode()
    ds = Dataset.open(root)  # verifies every shard's sha256
    ids = ds.instance_ids()
    assert len(ids) == len(set(ids)) == n
    assert sorted(ids) == sorted(sample_task(i).instance_id for i in range(n))
    expected = {t.instance_id: t for t in (sample_task(i, patch_bytes=20000) for i in range(n))}
    assert {t.instance_id: t for t in ds.tasks()} == expected


def test_second_writer_on_same_directory_is_refused(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds"):
        with pytest.raises(DatasetError, match="another taskforge process"):
            DatasetWriter(tmp_path / "ds")


def test_exception_inside_context_keeps_whole_shards_but_writes_no_manifest(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with pytest.raises(RuntimeError), DatasetWriter(root, tasks_per_shard=10) as w:
        w.add(sample_task(0))
        raise RuntimeError("pipeline crashed")
    assert not (root / MANIFEST).exists()
    assert len(list((root / "data").glob("shard-*.parquet"))) == 1
    with DatasetWriter(root) as w:
        assert sample_task(0).instance_id in w


def test_funnel_records_runs_and_resumed_run_replaces_its_entry(tmp_path: Path) -> None:
    rej = [Rejected("c1", RejectReason.NO_COVERING_TESTS), Rejected("c2", RejectReason.NO_COVERING_TESTS),
           Rejected("c3", RejectReason.LEAK_FOUND)]
    record_run(tmp_path, RunFunnel.from_outcomes("run-a", "pypi:demo==1.0", "demo", 2, rej, seconds=3.0))
    record_run(tmp_path, RunFunnel.from_outcomes("run-a", "pypi:demo==1.0", "demo", 3, rej, seconds=4.0))
    runs = read_funnel(tmp_path)
    assert list(runs) == ["run-a"]
    assert runs["run-a"].candidates == 6 and runs["run-a"].rejected == {"leak_found": 1, "no_covering_tests": 2}


def test_card_reports_counts_histogram_and_funnel(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    tasks = [sample_task(i, score=s) for i, s in enumerate([0.05, 0.07, 0.55, 0.99])]
    with DatasetWriter(root) as w:
        w.add_all(tasks)
        w.record_run(RunFunnel.from_outcomes("r", "pypi:demo==1.0", "demo", 4,
                                             [Rejected("x", RejectReason.SUITE_RED_AFTER_DELETION)] * 6))
    card = (root / "README.md").read_text()
    assert "4 verifiable coding tasks" in card
    assert "[0.0, 0.1)      2 " in card and "[0.9, 1.0]      1 " in card and "[0.5, 0.6)      1 " in card
    assert "| rejected: `suite_red_after_deletion` | 6 | 60% |" in card
    assert "| **accepted** | 4 | 40% |" in card
    assert 'load_dataset("parquet", data_files="ds/data/shard-*.parquet"' in card
    assert "path: data/shard-*.parquet" in card  # Hugging Face config front matter


def test_an_extracted_archive_has_file_times_a_wheel_can_hold(tmp_path: Path) -> None:
    """Archives store mtime 0; flit_core (idna 3.11) cannot build a wheel from 1970 files, so a dataset's
    environment could not be rebuilt from its own archive on another machine."""
    import os
    import zipfile

    from taskforge.dataset.repos import extract_archive, tar_directory

    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("X = 1\n")
    tar_directory(src, tmp_path / "a.tar.gz")
    out = extract_archive(tmp_path / "a.tar.gz", tmp_path / "out")
    f = out / "pkg" / "__init__.py"
    assert f.read_text() == "X = 1\n" and os.stat(f).st_mtime >= 315532800  # 1980-01-01
    zipfile.ZipInfo.from_file(f, "pkg/__init__.py")  # raises for a pre-1980 time
