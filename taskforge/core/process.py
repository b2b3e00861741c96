"""Run an external process the house way: argv list, own process group, timeout, whole group killed.

Used by sources (pip download), the local sandbox (venv builds, test runs) and benchmarks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
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
