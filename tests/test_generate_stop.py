"""A stopped or killed ``generate`` keeps the tasks it accepted (issue 19).

The generator runs in a subprocess (``tests/generate_fixtures.py``: the pipeline through the host
sandbox fake, on a self-built project). Once it reports an accepted candidate it is stopped:
SIGTERM -> it exits by itself with a readable dataset holding those tasks (manifest written);
SIGKILL -> ``taskforge recover`` (``taskforge.pipeline.recover``) makes them readable in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from generate_fixtures import make_mini_project

from taskforge.dataset.reader import Dataset

SCRIPT = Path(__file__).with_name("generate_fixtures.py")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _start_until_accepted(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, int]:
    src = make_mini_project(tmp_path / "minipkg")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(src), str(out), str(tmp_path / "work")], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            cwd=SCRIPT.parents[1])
    assert proc.stdout is not None
    accepted = 0
    for line in proc.stdout:
        if line.startswith("candidate accepted=True"):
            accepted += 1
            break
    assert accepted, "no candidate was accepted before the run ended"
    return proc, out, accepted


def test_sigterm_keeps_accepted_tasks_in_a_readable_dataset(tmp_path: Path) -> None:
    proc, out, accepted = _start_until_accepted(tmp_path)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, rest
    tasks = Dataset.open(out).tasks()  # the manifest exists: a complete dataset
    assert len(tasks) >= accepted
    assert "error stopped by SIGTERM" in rest or "validated 6" in rest, rest  # or it had just finished


def test_sigkill_then_recover_reads_the_tasks_from_the_journal(tmp_path: Path) -> None:
    from taskforge.pipeline.recover import recover

    proc, out, accepted = _start_until_accepted(tmp_path)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    start = time.monotonic()
    done = recover(out)
    took = time.monotonic() - start
    assert done.tasks >= accepted and done.without_archive == 0
    assert len(Dataset.open(out).tasks()) == done.tasks
    assert took < 30, f"recovery took {took:.1f}s"


def test_the_corpus_bench_recovers_a_generate_killed_before_its_manifest(tmp_path: Path) -> None:
    """tomlkit in the corpus: SIGKILL after the grace period left 4 whole shards and no manifest, and the
    bench counted 0 tasks written; it now recovers the dataset first, as a user would."""
    from taskforge.bench.corpus import _recover_if_killed, _written_tasks

    proc, out, accepted = _start_until_accepted(tmp_path)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert _written_tasks(out) == []  # no manifest: a reader sees nothing
    said: list[str] = []
    _recover_if_killed(out, "minipkg", said.append)
    assert len(_written_tasks(out)) >= accepted and "recovered" in said[0]
    _recover_if_killed(out, "minipkg", said.append)  # a dataset with its manifest is left alone
    assert len(said) == 1
