"""The test run of an exported Harbor task's grading, and the parent's side of its records channel.

Standalone: stdlib + the shipped ``harbor_records.py`` (copied next to the verifier as ``tests/harbor_run.py``;
never imports taskforge).

- ``run_runner`` starts ``runner/pytest_runner.py`` as a child under a fresh unprivileged uid (no
  supplementary groups, ``no_new_privs``, a process limit) in its own session; the child's fd 1 is a pipe
  to this process, the runner's records channel, which the runner takes before pytest or any project
  code is imported (fds 1 and 2 then go to a log file). Records are read as they arrive.
- When the runner exits, or at the timeout, ``kill_run`` kills every process of that uid (``kill(-1)``
  sent from the uid itself, atomic in the kernel, repeated until /proc shows none alive), and only then
  is the channel read to its end: nothing of the run is alive when its records are judged.
- ``Ledger`` (``sandboxes/runner/records.py``, shipped as ``tests/harbor_records.py``: the reward path's own
  reading) judges the records: the first record of each (test, phase) wins; a second one, a line that is
  not a record, a record before ``hello`` or after ``end``, a record under a collector that failed is
  forged; no ``end`` means the run never finished; a test counts once its teardown record came.

Without root (a host run) the child keeps this process's uid and only its session is killed: a process
that left the session is out of reach (``RunResult.uid`` is None then).
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__:  # imported from the repository (taskforge.dataset)
    from sandboxes.runner.records import Ledger
else:  # the task's tests/harbor_run.py: the shipped copy of sandboxes/runner/records.py is its sibling
    from harbor_records import Ledger  # type: ignore[no-redef]

CHANNEL_LIMIT = 256 << 20  # an honest runner writes ~150 bytes per test phase
NPROC_LIMIT = 4096


# -- the test run: a child under a fresh uid; every process of that uid killed before reading --------
def libc_prctl():  # noqa: ANN202
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None


def demote(uid: int | None, prctl) -> Callable[[], None]:  # noqa: ANN001
    def run() -> None:
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                import resource

                resource.setrlimit(resource.RLIMIT_NPROC, (NPROC_LIMIT, NPROC_LIMIT))
            except (ImportError, ValueError, OSError):
                pass
        if prctl is not None:
            prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: no setuid binary gives the run its uid back
        os.umask(0o022)
    return run


def _procs_of(uid: int) -> list:
    """Live (non-zombie) processes whose real, effective or saved uid is ``uid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path("/proc", entry, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uids = fields.get("Uid", "").split()
        if str(uid) in uids[:3] and not fields.get("State", "").strip().startswith(("Z", "X")):
            found.append(int(entry))
    return found


def _session_of(pid: int) -> int | None:
    try:
        stat = Path("/proc", str(pid), "stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return None


def _session_procs(sid: int) -> list:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()
            and _session_of(int(p)) == sid and not _zombie(int(p))]


def _zombie(pid: int) -> bool:
    try:
        return Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def kill_run(proc: subprocess.Popen, uid: int | None) -> bool:
    """Kill the run's whole process tree; True when /proc shows nothing of it left alive."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(50):
        if uid is not None:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the forked killer
                try:
                    os.setgroups([])
                    os.setgid(uid)
                    os.setuid(uid)
                    os.kill(-1, signal.SIGKILL)  # every process of this uid, atomically, but the caller
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            left = _procs_of(uid)
        else:  # unprivileged: what stayed in the run's session (a process that left it is out of reach)
            left = _session_procs(proc.pid)
            for p in left:
                try:
                    os.kill(p, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            pass
        if not left:
            return True
        time.sleep(0.02)
    return False


def _read_channel(proc: subprocess.Popen, deadline: float) -> tuple[bytes, bool, bool]:
    """Records until the runner exits or the deadline passes: (bytes, timed_out, flooded)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    chunks: list = []
    total, eof = 0, False
    while proc.poll() is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(chunks), True, False
        if eof:
            try:
                proc.wait(timeout=min(left, 0.5))
            except subprocess.TimeoutExpired:
                pass
            continue
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            data = os.read(fd, 1 << 16)
            eof = not data
            chunks.append(data)
            total += len(data)
            if total > CHANNEL_LIMIT:
                return b"".join(chunks), False, True
    return b"".join(chunks), False, False


def _drain(proc: subprocess.Popen, limit_s: float = 10.0) -> bytes:
    """What is left in the channel once every writer is dead (EOF comes at once)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    chunks: list = []
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            break
        data = os.read(fd, 1 << 16)
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def grader_uid(python: str, scratch: Path, prctl) -> int | None:  # noqa: ANN001
    """A fresh uid no process has, if this process may switch to it and the interpreter works for it."""
    if os.geteuid() != 0:
        return None
    for _ in range(20):
        uid = 200000 + secrets.randbelow(1800000)
        if not _procs_of(uid):
            break
    try:
        probe = subprocess.run([python, "-I", "-c", "import pytest"], cwd=str(scratch),
                               env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, preexec_fn=demote(uid, prctl), timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return uid if probe.returncode == 0 else None


@dataclass
class RunResult:
    ledger: Ledger
    uid: int | None
    timed_out: bool = False
    all_dead: bool = True
    exit_code: int | None = None
    seconds: float = 0.0
    stragglers: int = 0  # processes of the run still alive when the runner exited (then killed)


def run_runner(python: str, runner: Path, request: Path, cwd: Path, env: dict, log: Path, uid: int | None,
               timeout_s: float) -> RunResult:
    """Run the runner on ``request`` as ``uid``; see the module docstring. ``log`` gets fds 1 and 2."""
    prctl = libc_prctl()
    started = time.monotonic()
    with open(log, "ab") as err:
        proc = subprocess.Popen([python, str(runner), str(request)], cwd=str(cwd), env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True, preexec_fn=demote(uid, prctl))
    stragglers = 0
    try:
        data, timed_out, flooded = _read_channel(proc, started + timeout_s)
        stragglers = len(_procs_of(uid)) if uid is not None else len(_session_procs(proc.pid))
    finally:
        all_dead = kill_run(proc, uid)
    if not flooded:
        data += _drain(proc)
    ledger = Ledger.read(data)
    if flooded:
        ledger.forged.append(f"more than {CHANNEL_LIMIT} bytes on the records channel")
    return RunResult(ledger, uid, timed_out, all_dead, proc.returncode, round(time.monotonic() - started, 3),
                     stragglers)
