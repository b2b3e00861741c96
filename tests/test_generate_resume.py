"""Resumability for real: ``generate`` SIGKILLed at a random point, run again, equals an uninterrupted run.

The generator runs in a subprocess (``tests/generate_fixtures.py``: the pipeline through the host
sandbox fake, on a self-built project), killed with SIGKILL (its whole process group) at a random
moment of an uninterrupted run's duration, then started again with the same arguments.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from generate_fixtures import make_mini_project

from taskforge.dataset.reader import Dataset

SCRIPT = Path(__file__).with_name("generate_fixtures.py")


def _start(src: Path, out: Path, work: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(SCRIPT), str(src), str(out), str(work)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            cwd=SCRIPT.parents[1])


def _finish(proc: subprocess.Popen[str]) -> int:
    out, _ = proc.communicate(timeout=1800)
    assert proc.returncode == 0, out[-3000:]
    return int(out.strip().splitlines()[-1].split()[-1])


def _rows(out: Path) -> list[str]:
    return [t.instance_id for t in Dataset.open(out).tasks()]


@pytest.mark.slow
@pytest.mark.timeout(2400)  # three pipeline runs; minutes on a loaded 2-core machine
def test_sigkill_at_a_random_point_then_rerun_gives_the_uninterrupted_dataset(tmp_path):
    src = make_mini_project(tmp_path / "minipkg")
    start = time.monotonic()
    total = _finish(_start(src, tmp_path / "a", tmp_path / "work-a"))
    took = time.monotonic() - start
    expected = _rows(tmp_path / "a")
    assert expected and len(set(expected)) == len(expected)

    seed = int(os.environ.get("TF_RESUME_SEED", random.randrange(10**6)))
    delay = random.Random(seed).uniform(0.3, 0.95) * took
    proc = _start(src, tmp_path / "b", tmp_path / "work-b")
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    journal = tmp_path / "b" / ".journal"
    done_before = sum(1 for p in journal.rglob("*.json")) if journal.is_dir() else 0

    validated = _finish(_start(src, tmp_path / "b", tmp_path / "work-b"))
    got = _rows(tmp_path / "b")
    assert sorted(got) == sorted(expected), f"seed {seed}, killed after {delay:.1f}s of {took:.1f}s"
    assert len(set(got)) == len(got)
    assert validated == total - done_before, "finished candidates were validated again"
    manifest_a = json.loads((tmp_path / "a" / "manifest.json").read_text())
    manifest_b = json.loads((tmp_path / "b" / "manifest.json").read_text())
    # the writer may drop rows a killed run had already committed; tasks are flushed as they are decided,
    # on a timer (taskforge/pipeline/task_sink.py), so the shard count depends on timing, the tasks do not
    drop = ("duplicates_dropped", "shards")
    assert {k: v for k, v in manifest_b["counts"].items() if k not in drop} == \
        {k: v for k, v in manifest_a["counts"].items() if k not in drop}
    assert manifest_b["counts"]["tasks"] == len(expected)
    assert not list((tmp_path / "b").rglob("*.tmp")), "a partial file was left behind"
