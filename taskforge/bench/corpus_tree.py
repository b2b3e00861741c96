"""Run one command as a process tree capped by CPU time (the tree's, not just the root's) and wall time.

The corpus benchmark gives every package a CPU budget: ``taskforge generate`` plus every child it starts
(environment builds, test runs, warm sandbox servers). The tree is followed through ``/proc``: every
process whose parent chain reaches the root, or that was seen in the tree once and is still alive (a
child re-parented to PID 1 after its parent died still belongs to the run; its start time guards
against PID reuse). Its CPU while running is the sum of ``utime + stime + cutime + cstime`` of the live
members, plus the last reading of members that died while their parent was outside the tree (nobody
in the tree reaps them, so no ``cutime`` picks them up). A member whose parent was a member when last
seen is reaped by it, so its CPU is already in that parent's ``cutime`` (counting it again would count
every test run twice: the sandbox, its jail and pytest end within one poll). The final figure is the root's own rusage from
``wait4`` (the root and every descendant it reaped) plus the escaped members' last readings.

On the cap (or the wall limit) the root gets SIGTERM (taskforge can flush what it has), then after a
grace period the whole group and every tracked member gets SIGKILL. After the root exits, any member
still alive is killed too: no process of a run outlives it. (A process that detaches and is never seen
by a poll, once a second, cannot be followed; the warm sandboxes and test runs that matter live longer.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class TreeRun:
    """How one capped run ended: ``status`` is ``exited`` (rc set), ``cpu_cap`` or ``wall_cap``."""

    status: str
    rc: int | None
    cpu_s: float
    wall_s: float
    leftovers: int = 0  # tree members still alive after the root exited (killed by us)


def _stat(pid: int) -> tuple[int, int, float] | None:
    """(ppid, starttime ticks, own + reaped-children CPU seconds) of ``pid``, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    try:
        ppid, start = int(fields[1]), int(fields[19])
        cpu = sum(int(x) for x in fields[11:15]) / _TICK
    except (IndexError, ValueError):
        return None
    return ppid, start, cpu


class _Tree:
    def __init__(self, root: int) -> None:
        self.root = root
        self.members: dict[int, int] = {}  # pid -> starttime
        self.last_cpu: dict[int, float] = {}
        self.parent: dict[int, int] = {}
        self.escaped_cpu = 0.0  # CPU of members that died outside the tree (nobody here reaped them)

    def poll(self) -> float:
        """Refresh membership; the tree's CPU seconds so far."""
        stats: dict[int, tuple[int, int, float]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                st = _stat(int(name))
                if st is not None:
                    stats[int(name)] = st
        inside = {self.root}
        changed = True
        while changed:  # a fixpoint over the ppid graph (few hundred processes: cheap)
            changed = False
            for pid, (ppid, _s, _c) in stats.items():
                if pid not in inside and (ppid in inside or self.members.get(pid) == stats[pid][1]):
                    inside.add(pid)
                    changed = True
        known = set(self.members)
        for pid in list(self.members):
            if pid not in stats or stats[pid][1] != self.members[pid]:  # gone (or its pid reused)
                # its parent when last seen reaps it: a member (its CPU moves into that member's cutime,
                # even when the parent died since, after reaping it) or an outsider (PID 1, a subreaper)
                if pid != self.root and self.parent.get(pid) not in known:  # the root: its rusage, from wait4
                    self.escaped_cpu += self.last_cpu.get(pid, 0.0)
                del self.members[pid]
                self.last_cpu.pop(pid, None)
                self.parent.pop(pid, None)
        total = self.escaped_cpu
        for pid in inside:
            if pid in stats:
                ppid, start, cpu = stats[pid]
                self.members[pid] = start
                self.last_cpu[pid] = cpu
                self.parent[pid] = ppid
                total += cpu
        return total

    def escaped_live_cpu(self) -> float:
        """CPU of members that are not the root and no longer descend from it (re-parented away)."""
        return sum(cpu for pid, cpu in self.last_cpu.items()
                   if pid != self.root and not self._descends(pid))

    def _descends(self, pid: int) -> bool:
        seen = 0
        while pid in self.parent and seen < 256:
            pid, seen = self.parent[pid], seen + 1
            if pid == self.root:
                return True
        return False

    def kill_all(self, sig: int) -> int:
        killed = 0
        for pid, start in list(self.members.items()):
            if pid == self.root:
                continue
            st = _stat(pid)
            if st is None or st[1] != start:
                continue
            try:
                os.kill(pid, sig)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        return killed


def run_tree(argv: list[str], *, cpu_cap_s: float, wall_cap_s: float, log: Path,
             cwd: Path | None = None, env: Mapping[str, str] | None = None, poll_s: float = 1.0,
             grace_s: float = 10.0) -> TreeRun:
    """Run ``argv`` (stdout+stderr to ``log``) until it exits, its tree spends ``cpu_cap_s`` CPU seconds
    or ``wall_cap_s`` pass; the whole tree is gone when this returns."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=dict(env) if env is not None else None, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    tree = _Tree(proc.pid)
    status, deadline_kill = "exited", None
    try:
        while True:
            cpu = tree.poll()  # before the exit check: a child it started just now is seen once
            pid, wstatus, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            now = time.monotonic()
            if deadline_kill is None:
                if cpu >= cpu_cap_s:
                    status = "cpu_cap"
                elif now - start >= wall_cap_s:
                    status = "wall_cap"
                if status != "exited":
                    _signal_group(proc.pid, signal.SIGTERM)
                    deadline_kill = now + grace_s
            elif now >= deadline_kill:
                _signal_group(proc.pid, signal.SIGKILL)
                tree.kill_all(signal.SIGKILL)
            time.sleep(poll_s)
    except BaseException:  # interrupted ourselves: take the tree down with us
        _signal_group(proc.pid, signal.SIGKILL)
        tree.kill_all(signal.SIGKILL)
        proc.wait()
        raise
    proc.returncode = os.waitstatus_to_exitcode(wstatus)
    wall = time.monotonic() - start
    tree.poll()
    escaped = tree.escaped_cpu + tree.escaped_live_cpu()
    _signal_group(proc.pid, signal.SIGKILL)  # the group outlives its leader: end it
    leftovers = tree.kill_all(signal.SIGKILL)
    own = usage.ru_utime + usage.ru_stime
    rc = proc.returncode if status == "exited" else None
    return TreeRun(status, rc, round(own + escaped, 2), round(wall, 2), leftovers)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
