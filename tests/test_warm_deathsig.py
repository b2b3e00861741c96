"""A warm test server and its forked run die with the taskforge process that started them.

``sandboxes/runner/warm_zygote.py`` sets ``PR_SET_PDEATHSIG`` for itself and for every run it forks: a
parent killed with SIGKILL (no cleanup of its own, no watchdog here) takes the server and a spinning run
along, instead of leaving them at PID 1 (markdown 3.11.3).
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

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")

PARENT = r'''
import json, shutil, sys, tempfile, threading
from pathlib import Path
from sandboxes.local import RUNNER, build_request
from sandboxes.protocol import RunRequest
from sandboxes.warm import start_server
from taskforge.core.environment import EnvSpec

ws, runner_dir = Path(sys.argv[1]), Path(sys.argv[2])
shutil.copyfile(RUNNER, runner_dir / "pytest_runner.py")
server = start_server([sys.executable], runner_dir, {"PATH": "/usr/bin:/bin", "HOME": str(ws)}, ws)
spec = EnvSpec(project_name="w", python="3.11", install_target="", test_paths=("test_spin.py",))
scratch = Path(tempfile.mkdtemp())
req = build_request(spec, ws, RunRequest(tests=("test_spin.py",)), scratch)
(scratch / "request.json").write_text(json.dumps(req))
line = {"request": str(scratch / "request.json"), "cwd": str(ws), "env": {"PATH": "/usr/bin:/bin"},
        "log": str(scratch / "log")}
server.proc.stdin.write((json.dumps(line) + "\n").encode()); server.proc.stdin.flush()
started = server._readline(60)
print(json.dumps({"server": server.proc.pid, "run": int(started.split()[1])}), flush=True)
threading.Event().wait(600)
'''


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_server_and_its_spinning_run_die_with_the_parent(tmp_path: Path) -> None:
    ws, runner_dir = tmp_path / "ws", tmp_path / "runner"
    ws.mkdir()
    runner_dir.mkdir()
    (ws / "test_spin.py").write_text("def test_spin():\n    while True:\n        pass\n")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(ws), str(runner_dir)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              start_new_session=True)
    assert parent.stdout is not None
    pids = json.loads(parent.stdout.readline())
    try:
        time.sleep(1.0)
        assert _alive(pids["server"]) and _alive(pids["run"])
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (_alive(pids["server"]) or _alive(pids["run"])):
            time.sleep(0.05)
        assert not _alive(pids["server"]), "the warm server outlived its parent"
        assert not _alive(pids["run"]), "the forked run outlived its server"
    finally:
        for pid in pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
