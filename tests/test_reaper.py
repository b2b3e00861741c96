"""No process of a run outlives it (``sandboxes/reaper.py``), even when taskforge is SIGKILLed.

Each test starts a parent process that enters ``reaper.guard()`` and starts children that would
otherwise survive it (own session, double-forked orphans, one without the run token), then ends the
parent (SIGKILL, or a normal exit) and checks that every child is gone within seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandboxes import reaper

ROOT = Path(__file__).resolve().parents[1]

PARENT = r'''
import json, os, subprocess, sys, time
from sandboxes import reaper

SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]
before = subprocess.Popen(SLEEP, start_new_session=True)  # started before the guard: not the run's
with reaper.guard():
    own = subprocess.Popen(SLEEP, start_new_session=True)
    bare = subprocess.Popen(SLEEP, start_new_session=True, env={})  # dropped the token
    # a double fork: the grandchild is re-parented away from us at once, in its own session
    orphan = subprocess.run([sys.executable, "-c", "import subprocess, sys; "
                             "print(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
                             "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"], capture_output=True, text=True).stdout.strip()
    time.sleep(1.5)  # the watchdog has seen them
    print(json.dumps({"run": [own.pid, bare.pid, int(orphan)], "before": before.pid}), flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
print("left", flush=True)
time.sleep(float(sys.argv[2]))
'''


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_dead(pids: list[int], within: float) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _start(mode: str, linger: float = 0) -> tuple[subprocess.Popen[str], dict]:
    proc = subprocess.Popen([sys.executable, "-c", PARENT, mode, str(linger)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            start_new_session=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_sigkill_of_the_parent_kills_every_process_of_the_run() -> None:
    proc, pids = _start("hang")
    try:
        assert all(_alive(p) for p in pids["run"])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert _wait_dead(pids["run"], 5.0) == [], "processes outlived a SIGKILLed run"
        assert _alive(pids["before"]), "a process started before the guard was killed"
    finally:
        for p in (*pids["run"], pids["before"]):
            _kill(p)


def test_a_normal_exit_of_the_guard_kills_what_is_left() -> None:
    proc, pids = _start("exit", linger=30)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "left"
        assert _wait_dead(pids["run"], 5.0) == []
        assert proc.poll() is None and _alive(pids["before"])  # the parent itself lives on
    finally:
        for p in (proc.pid, *pids["run"], pids["before"]):
            _kill(p)
        proc.wait(10)


def test_descendants_and_process_table() -> None:
    table = {10: (1, 5), 11: (10, 6), 12: (11, 7), 13: (1, 8)}
    assert reaper.descendants(table, {10}) == {11, 12}
    me = reaper.process_table()[os.getpid()]
    assert me[0] == os.getppid()


def test_run_env_carries_the_token_of_a_guarded_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandboxes.local import run_env
    from taskforge.core.environment import EnvSpec

    spec = EnvSpec(project_name="p", python="3.11", install_target="")
    assert reaper.TOKEN_ENV not in run_env(spec, tmp_path, tmp_path, tmp_path, {})
    monkeypatch.setenv(reaper.TOKEN_ENV, "abc123")
    assert run_env(spec, tmp_path, tmp_path, tmp_path, {})[reaper.TOKEN_ENV] == "abc123"
