"""Run an external process the house way: argv list, own process group, timeout, whole group killed.

Used by sources (pip download), the local sandbox (venv builds, test runs) and benchmarks.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path


def run_capture(argv: list[str], timeout_s: float, cwd: Path | None = None,
                env: Mapping[str, str] | None = None, tail: int = 0) -> tuple[int | None, str]:
    """Run ``argv`` in its own process group; return (exit code or None on timeout, combined output).

    The whole group is killed on timeout and after exit (no stray children). ``tail`` > 0 keeps only
    the last ``tail`` bytes of the output.
    """
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=dict(env) if env is not None else None, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            _killpg(proc)
        size = out.seek(0, os.SEEK_END)
        out.seek(max(0, size - tail) if tail > 0 else 0)
        return rc, out.read().decode("utf-8", "replace")


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


CHANNEL_CAP = 256 << 20  # bytes of records kept from one run; more is a flood (and forged)


def run_channel(argv: list[str], timeout_s: float, *, cwd: Path | None = None,
                env: Mapping[str, str] | None = None, tail: int = 6000, pass_fds: tuple[int, ...] = (),
                kill: Callable[[], None] | None = None) -> tuple[int | None, bytes, str]:
    """Run ``argv`` with a pipe as its stdout (the runner's records channel); return (exit code or None
    on timeout, what came through the pipe, the last ``tail`` bytes of stderr).

    The channel is read while the process runs. Once the process exited (or timed out) its whole
    group is killed, then ``kill`` (e.g. a cgroup's kill-all) runs, and what is still in the pipe is
    read; a writer that outlived all that cannot hold the call: reading stops after a short grace.
    """
    read_fd, write_fd = os.pipe()
    chunks: list[bytes] = []
    size = 0
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=dict(env) if env is not None else None, stdout=write_fd,
                                    stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
                                    pass_fds=pass_fds)
        finally:
            os.close(write_fd)
        deadline = time.monotonic() + timeout_s
        rc: int | None = None
        grace_end: float | None = None
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while True:
                now = time.monotonic()
                if grace_end is None:
                    rc = proc.poll()
                    if rc is not None or now >= deadline:
                        _killpg(proc)
                        rc = proc.returncode if rc is not None or now < deadline else None
                        if kill is not None:
                            kill()
                        grace_end = time.monotonic() + 1.0
                elif now >= grace_end:
                    break
                ready, _, _ = select.select([pipe], [], [], 0.05)
                if not ready:
                    continue
                data = pipe.read(1 << 16)
                if not data:
                    if grace_end is not None:
                        break
                    continue
                if size < CHANNEL_CAP:
                    chunks.append(data)
                    size += len(data)
        if grace_end is None:  # pragma: no cover - the loop always kills before leaving
            _killpg(proc)
        size = err.seek(0, os.SEEK_END)
        err.seek(max(0, size - tail) if tail > 0 else 0)
        return rc, b"".join(chunks), err.read().decode("utf-8", "replace")
