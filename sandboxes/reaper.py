"""No process of a run outlives it, even when taskforge itself is killed (SIGTERM or SIGKILL).

Test runs, warm servers and pip builds each run in their own session, so a dying taskforge takes none of
them with it: they are re-parented to PID 1 and keep burning CPU (markdown 3.11.3: a pytest child spinning
in ``BlockParser.parseBlocks`` and the warm sandbox outlived a killed ``generate``). Confined runs already
die with their parent (bwrap ``--die-with-parent``, a PID namespace per run); this module covers the rest.

``guard()`` (a context manager around a whole command) starts one watchdog process, ``python -m
sandboxes.reaper PARENT_PID TOKEN``, and puts ``TASKFORGE_RUN_TOKEN=TOKEN`` into ``os.environ`` (every
child started from it, and every test run's environment, ``sandboxes.local.run_env``, carries it). The
watchdog
- snapshots the process tree below PARENT_PID every ``SNAPSHOT_S`` (``/proc/*/stat``: pid, parent, start
  time), so it still knows the descendants after they were re-parented (descendants that existed before
  the guard started are not the run's and are left alone);
- when PARENT_PID is gone (its pipe to the watchdog closes, or ``getppid()`` changes), or when ``guard``
  exits normally, SIGKILLs every process it saw below PARENT_PID (same pid *and* start time: never a
  recycled pid), every process whose environment holds TOKEN, and their descendants, until a sweep finds
  none (at most ``SWEEP_S``);
- then exits. It is itself killed with the parent's session only if that session is killed as a group.

Not covered: processes that dropped the token (``env={}``) *and* were started less than ``SNAPSHOT_S``
before the kill; docker containers, which are not processes of the run: each carries an owner tag
(``owner_tag()``: host, pid and start time of the process that created it), the docker sandbox removes
its own in a ``finally``, and removes those whose owner is gone (``owner_gone``) when it starts. Linux only
(``/proc``); elsewhere ``guard`` does nothing. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

TOKEN_ENV = "TASKFORGE_RUN_TOKEN"
SNAPSHOT_S = 0.5
SWEEP_S = 10.0
_PROC = Path("/proc")


def run_token() -> str:
    """The token of the guarded run this process belongs to ("" outside ``guard``)."""
    return os.environ.get(TOKEN_ENV, "")


@contextlib.contextmanager
def guard() -> Iterator[str]:
    """Start the watchdog for this process (see the module docstring); yields the run token.

    Nested guards reuse the outer one. On exit, every process of the run still alive is killed.
    """
    if run_token() or not _PROC.is_dir():
        yield run_token()
        return
    token = secrets.token_hex(8)
    os.environ[TOKEN_ENV] = token
    watchdog = subprocess.Popen([sys.executable, "-m", "sandboxes.reaper", str(os.getpid()), token],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True, cwd=Path(__file__).resolve().parents[1],
                                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        assert watchdog.stdout is not None
        ready, _, _ = select.select([watchdog.stdout], [], [], 60.0)  # it has seen what is not the run's
        if not ready or watchdog.stdout.readline().strip() != b"ready":
            watchdog.kill()  # no watchdog here (no /proc access?): run unguarded rather than not at all
        yield token
    finally:
        os.environ.pop(TOKEN_ENV, None)
        assert watchdog.stdin is not None
        with contextlib.suppress(OSError):
            watchdog.stdin.close()  # EOF: sweep now, then exit
        try:
            watchdog.wait(timeout=SWEEP_S + 5)
        except subprocess.TimeoutExpired:
            watchdog.kill()
            watchdog.wait()


def owner_tag() -> str:
    """``host:pid:start`` of this process: what a resource outliving a killed run (a container) is labelled
    with, so a later run can tell that its owner is gone (``owner_gone``) even if the pid was reused."""
    st = _stat(str(os.getpid()))
    return f"{socket.gethostname()}:{os.getpid()}:{st[1] if st else ''}"


def owner_gone(tag: str) -> bool:
    """True when ``tag`` (``owner_tag()``, or the older ``host:pid``) names a process of this host that no
    longer runs; False for other hosts and for tags it cannot read (never reap what may be alive)."""
    host, _, rest = tag.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit() or not _PROC.is_dir():
        return False
    st = _stat(pid)
    return st is None or (start.isdigit() and st[1] != int(start))


# --- the watchdog ---------------------------------------------------------------------------------

def _stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, start time) of ``pid``, or None when it is gone."""
    try:
        raw = (_PROC / pid / "stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19])


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time) of every visible process."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir(_PROC):
        if entry.isdigit() and (st := _stat(entry)) is not None:
            table[int(entry)] = st
    return table


def descendants(table: dict[int, tuple[int, int]], roots: set[int]) -> set[int]:
    """Every pid below ``roots`` in ``table`` (the roots excluded)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out and child not in roots:
                out.add(child)
                todo.append(child)
    return out


def _has_token(pid: int, token: bytes) -> bool:
    try:
        return token in (_PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


def sweep(seen: dict[int, int], token: str, spare: set[int], deadline_s: float = SWEEP_S) -> int:
    """SIGKILL the run's processes (seen ones with their start time, token holders, their descendants)
    until none is left; ``spare`` is never killed. Returns how many kills were sent."""
    needle = f"{TOKEN_ENV}={token}".encode()
    kills = 0
    deadline = time.monotonic() + deadline_s
    quiet = 0
    while time.monotonic() < deadline and quiet < 2:
        table = process_table()
        doomed = {pid for pid, start in seen.items() if table.get(pid, (0, -1))[1] == start}
        doomed |= {pid for pid in table if pid not in spare and _has_token(pid, needle)}
        doomed |= descendants(table, doomed)
        doomed -= spare
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                kills += 1
        quiet = quiet + 1 if not doomed else 0
        time.sleep(0.05)
    return kills


def watch(parent: int, token: str) -> int:
    """The watchdog's loop (module docstring): returns once the run's processes are all dead."""
    me = os.getpid()
    seen: dict[int, int] = {}
    stdin = sys.stdin.fileno()
    table = process_table()
    before = {(pid, table[pid][1]) for pid in descendants(table, {parent})}  # not the run's: never killed
    os.write(sys.stdout.fileno(), b"ready\n")
    while True:
        table = process_table()
        if parent in table:
            seen.update({pid: table[pid][1] for pid in descendants(table, {parent})
                         if pid != me and (pid, table[pid][1]) not in before})
        ready, _, _ = select.select([stdin], [], [], SNAPSHOT_S)
        if ready and not os.read(stdin, 4096):
            break  # the parent closed the pipe (guard exited) or died
        if os.getppid() != parent:
            break
    seen.pop(me, None)
    spare = {me, os.getppid()} if os.getppid() == parent else {me}
    sweep(seen, token, spare)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the terminal is the parent's to handle
    sys.exit(watch(int(sys.argv[1]), sys.argv[2]))
