"""``taskforge generate`` killed with SIGKILL mid-run leaves no process behind (issue 19).

The project's one test starts a sleeper in its own session and then spins: the suite run never ends
by itself, as markdown 3.11.3's did when a deletion made ``BlockParser.parseBlocks`` loop. Once the
spinning runner and the sleeper exist, the CLI is SIGKILLed; within seconds none of its descendants
(runner, sleeper, pip, watchdog) may be alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandboxes import reaper
from tests.fixtures_repos import write

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SPIN = '''\
import subprocess
import sys

from spinpkg import one


def test_spin():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # tf-sleeper"],
                     start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert one() == 1
    while True:
        pass
'''


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int, start: int) -> bool:
    st = reaper.process_table().get(pid)
    return st is not None and st[1] == start and not Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1] \
        .split()[0] == "Z"


def test_sigkill_of_generate_leaves_no_descendant(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    write(tmp_path / "spin", {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                          '[project]\nname = "spinpkg"\nversion = "1"\n',
        "spinpkg/__init__.py": "def one():\n    return 1\n",
        "tests/test_spin.py": SPIN,
    })
    work = tmp_path_factory.getbasetemp() / "tf-shared-work"
    work.mkdir(exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", "from taskforge.cli import main; main()", "generate",
                             str(tmp_path / "spin"), "--out", str(tmp_path / "out"), "--work-dir", str(work),
                             "--sandbox", "local-unsafe", "--runs", "1", "--test-timeout", "500"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    seen: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            table = reaper.process_table()
            seen.update({p: table[p][1] for p in reaper.descendants(table, {proc.pid})})
            if any("tf-sleeper" in _cmdline(p) for p in seen) and any("pytest_runner" in _cmdline(p) for p in seen):
                break
            assert proc.poll() is None, "generate ended before its suite run spun"
            time.sleep(0.2)
        else:
            pytest.fail("the spinning suite run never started")
        time.sleep(1.0)  # the watchdog snapshots every 0.5 s
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        end = time.monotonic() + 8
        while time.monotonic() < end and any(_alive(p, s) for p, s in seen.items()):
            time.sleep(0.1)
        left = {p: _cmdline(p) for p, s in seen.items() if _alive(p, s)}
        assert not left, f"processes outlived the killed generate: {left}"
    finally:
        for pid, start in seen.items():
            if _alive(pid, start):
                os.kill(pid, signal.SIGKILL)
