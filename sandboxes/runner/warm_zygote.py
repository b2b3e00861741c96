"""In-environment fork server of ``sandboxes.warm``: pytest imported once, one fork per test run.

Standalone (stdlib + pytest + the runner next to it); it never imports taskforge, because it runs with
the environment's interpreter, copied next to ``pytest_runner.py``. It never imports the project's
code: every run forks from this pristine process, so no run sees another's modules or state.

Protocol, one JSON line per run on stdin: ``{"request": PATH, "cwd": DIR, "env": {...}, "log": PATH}``,
optionally ``"rewrite_cache": DIR`` (the run loads assert-rewritten test modules it has seen before from
there: ``rewrite_cache.py`` next to this file). It answers ``pid N`` when the child started, then ``exit RC`` when it ended (RC < 0: killed by signal).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import traceback


def _die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux ``PR_SET_PDEATHSIG``); nothing elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        return


def _child(req: dict, runner: object) -> int:
    os.setsid()  # own process group: the host kills the whole group on timeout
    _die_with_parent()  # a killed server takes its run along (no orphan spinning at PID 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # never the server's request pipe
    os.close(null)
    fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    roots = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[1:1] = roots  # where PYTHONPATH puts them in a fresh interpreter: after the script's folder
    tempfile.tempdir = None  # TMPDIR of this run, not the server's
    sys.argv = ["pytest_runner.py", req["request"]]
    if req.get("rewrite_cache"):
        try:
            importlib.import_module("rewrite_cache").install(req["rewrite_cache"])
        except ImportError:
            pass  # an older server folder without it: every module is rewritten, as before
    return int(runner.main(sys.argv))  # type: ignore[attr-defined]


def main() -> int:
    sys.dont_write_bytecode = True
    parent = os.getppid()
    _die_with_parent()  # the server dies with the taskforge process that started it
    if os.getppid() != parent:
        return 1
    runner = importlib.import_module("pytest_runner")  # imports pytest
    from _pytest.config import default_plugins

    for name in default_plugins:  # what every pytest start imports
        try:
            importlib.import_module(f"_pytest.{name}")
        except ImportError:
            pass
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for line in iter(sys.stdin.buffer.readline, b""):
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                code = _child(req, runner)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        out.write(f"pid {pid}\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(f"exit {os.waitstatus_to_exitcode(status)}\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
