"""A ``local`` sandbox whose test runs fork from a warm interpreter instead of starting a new one.

Validation makes many small runs (a few node ids each) in one environment; with the plain local sandbox
every run pays for starting Python and importing pytest and its plugins, which for small suites costs
more CPU than the tests. ``WarmLocalSandbox`` keeps, per environment, one server process
(``sandboxes/runner/warm_zygote.py``, started with the environment's interpreter under the same scrubbed
environment and ``unshare -rn`` as ``sandboxes.local``) that has imported pytest once and forks a child
per run. Each child sets the run's environment, working directory and ``sys.path`` exactly as a fresh
``python pytest_runner.py REQUEST`` would have them and runs the same runner, so reports are the same.

Guarantees kept from ``sandboxes.local``: wall-clock timeout with the child's whole process group
killed (also after a normal exit: no stray grandchildren), a scrubbed environment per run, the same
network isolation, nothing of the project imported before the run (the server never imports it: each
run starts from the pristine server). Runs with coverage (profiling), other backends and every run of a
project pytest itself imports (``extra["runner_dependency"]``: the server imports pytest before any workspace
exists, so it would hold no copy of iniconfig, or the wrong one) go to the wrapped sandbox unchanged. Same threat model as ``sandboxes.local``: for trusted code.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandboxes import startup_hooks
from sandboxes.ledger import read_ledger
from sandboxes.local import LocalSandbox, build_request, install_runner, read_records, read_tail, run_env
from sandboxes.protocol import EnvironmentFiles, RunOutput, RunRequest
from taskforge.core.environment import EnvSpec, PreparedEnv

ZYGOTE = Path(__file__).parent / "runner" / "warm_zygote.py"
REWRITE_CACHE = Path(__file__).parent / "runner" / "rewrite_cache.py"
_START_TIMEOUT_S = 120.0


class WarmServer:
    """One warm server process (``warm_zygote.py`` under some interpreter) for one environment.

    ``rewrite_cache``: the folder its runs share for assert-rewritten test modules
    (``sandboxes/runner/rewrite_cache.py``), in the server's own directory.
    """

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.rewrite_cache = Path(cwd).resolve() / "rewrite-cache"
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, cwd=cwd, bufsize=0, start_new_session=True)
        self.lock = threading.Lock()
        self._buf = b""
        line = self._readline(_START_TIMEOUT_S)
        if line != "ready":
            self.close()
            raise OSError(f"warm test server did not start (said {line!r})")

    def _readline(self, timeout: float) -> str | None:
        """The server's next line; None when none came within ``timeout``, "" when it exited."""
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return ""
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode().strip()

    def run(self, req: dict[str, Any], timeout: float) -> int | None:
        """Exit code of the run, or None when it passed ``timeout`` (its process group is killed)."""
        assert self.proc.stdin is not None
        deadline = time.monotonic() + timeout
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        started = self._readline(_START_TIMEOUT_S)
        if not started or not started.startswith("pid "):
            raise OSError(f"warm test server did not fork (said {started!r})")
        pid = int(started.split()[1])
        done = self._readline(deadline - time.monotonic())
        timed_out = done is None
        _killpg(pid)
        if timed_out:
            done = self._readline(30.0)
        if not done or not done.startswith("exit "):
            raise OSError(f"warm test server lost a run (said {done!r})")
        return None if timed_out else int(done.split()[1])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        _killpg(self.proc.pid)
        self.proc.wait()
        shutil.rmtree(self.rewrite_cache, ignore_errors=True)


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class WarmLocalSandbox:
    """``Sandbox`` protocol: ``sandboxes.local.LocalSandbox`` with forked test runs (module docstring)."""

    name = "local"

    def __init__(self, base: LocalSandbox) -> None:
        self.base = base
        self.name = base.name
        self._servers: dict[str, WarmServer] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"base": self.base}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["base"])  # type: ignore[misc]

    def prepare(self, spec: EnvSpec, repo_dir: Path) -> PreparedEnv:
        return self.base.prepare(spec, repo_dir)

    def warm(self) -> WarmLocalSandbox:
        return self

    def clone_env(self, env: PreparedEnv, scratch: Path) -> PreparedEnv:
        return self.base.clone_env(env, scratch)

    def environment_files(self, env: PreparedEnv) -> EnvironmentFiles:
        return self.base.environment_files(env)

    def _server(self, env: PreparedEnv, scratch: Path) -> WarmServer:
        with self._lock:
            server = self._servers.get(env.location)
            if server is not None and server.alive():
                return server
            venv = Path(env.location)
            install_runner(venv)  # the same runner the base sandbox runs, in the same folder
            wrapper = ["unshare", "-rn"] if self.base.network_isolated else []
            home = scratch / "server"
            (home / "home").mkdir(parents=True, exist_ok=True)
            (home / "tmp").mkdir(exist_ok=True)
            server_env = {**run_env(env.spec, home, venv, home, {}), "PYTHONPATH": "", startup_hooks.ROOTS_ENV: ""}
            server = start_server([*wrapper, str(venv / "bin" / "python")], venv / "taskforge-runner", server_env, home)
            self._servers[env.location] = server
            return server

    def run(self, env: PreparedEnv, workspace: Path, request: RunRequest) -> RunOutput:
        if request.coverage or request.grading or env.backend != self.name or env.extra.get("runner_dependency"):
            # gradings: always confined; a project pytest imports: its workspace copy, so no pre-imported pytest
            return self.base.run(env, workspace, request)
        workspace = Path(workspace).resolve()
        try:
            server = self._server(env, Path(tempfile.gettempdir()) / f"taskforge-warm-{os.getpid()}")
            return run_forked(server, env.spec, workspace, request,
                              lambda scratch: run_env(env.spec, workspace, Path(env.location), scratch, request.env))
        except OSError:
            return self.base.run(env, workspace, request)  # a server that cannot serve: the plain path

    def close(self) -> None:
        with self._lock:
            for server in self._servers.values():
                server.close()
            self._servers.clear()


def start_server(python: list[str], runner_dir: Path, env: dict[str, str], cwd: Path) -> WarmServer:
    """Start ``warm_zygote.py`` with ``python`` (argv prefix) from ``runner_dir``, which holds the runner."""
    for source in (REWRITE_CACHE, ZYGOTE):
        target = runner_dir / source.name
        if not target.is_file() or target.read_bytes() != source.read_bytes():
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            shutil.copyfile(source, tmp)
            os.replace(tmp, target)
    return WarmServer([*python, str(runner_dir / ZYGOTE.name)], env, cwd)


def run_forked(server: WarmServer, spec: EnvSpec, workspace: Path, request: RunRequest,
               child_env: Callable[[Path], dict[str, str]]) -> RunOutput:
    """One run of ``request`` forked from ``server``; ``child_env(scratch)`` is the run's whole environment."""
    start = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="taskforge-run-"))
    try:
        (scratch / "home").mkdir()
        (scratch / "tmp").mkdir()
        req = build_request(spec, workspace, request, scratch)
        (scratch / "request.json").write_text(json.dumps(req))
        log = scratch / "output.log"
        with server.lock:
            rc = server.run({"request": str(scratch / "request.json"), "cwd": str(workspace),
                             "env": child_env(scratch), "log": str(log),
                             "rewrite_cache": str(server.rewrite_cache)}, request.timeout_s)
        report = read_ledger(read_records(Path(req["channel_path"])), exit_code=rc,
                             elapsed=time.monotonic() - start, output_tail=read_tail(log, 6000),
                             timed_out=rc is None, collect_only=request.collect_only)
        return RunOutput(report=report, coverage=None, seconds=round(time.monotonic() - start, 3))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
