"""Shipped fakes of the ``Sandbox`` seam: the real in-sandbox runner, run with *this* interpreter.

No environment to build, no isolation at all: seam fakes for tests and quick experiments on trusted
code, never a sandbox. Both are picklable (process pools, Ray).

- ``HostSandbox``: runs without coverage fork from one warm server per process (``sandboxes.warm``),
  as validation's local runs do; coverage runs start a fresh interpreter.
- ``SubprocessSandbox``: one plain subprocess per run (no coverage, no warm server).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sandboxes.ledger import read_ledger
from sandboxes.local import build_request, read_coverage, read_records
from sandboxes.protocol import EnvironmentFiles, RunOutput, RunRequest
from sandboxes.warm import WarmServer, run_forked, start_server
from taskforge.core.environment import EnvSpec, PreparedEnv
from taskforge.core.process import run_capture

RUNNER = Path(__file__).resolve().parent / "runner" / "pytest_runner.py"


class _HostEnv:
    """What both fakes share: the environment is this interpreter; nothing to clone or audit."""

    name = "host"

    def prepare(self, spec: EnvSpec, repo_dir: Path) -> PreparedEnv:
        return PreparedEnv(spec, self.name, sys.prefix, platform.python_version())

    def warm(self) -> _HostEnv:
        return self

    def clone_env(self, env: PreparedEnv, scratch: Path) -> PreparedEnv:
        return env

    def environment_files(self, env: PreparedEnv) -> EnvironmentFiles:
        return EnvironmentFiles()


class HostSandbox(_HostEnv):
    """Runs the real runner with this interpreter (no isolation: a seam fake, not a sandbox).

    Runs without coverage fork from one warm server per process (``sandboxes.warm``), as
    validation's local runs do; coverage runs start a fresh interpreter.
    """

    def __init__(self) -> None:
        self._server: WarmServer | None = None
        self._dir: str | None = None

    def __getstate__(self) -> dict[str, object]:
        return {}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__()  # type: ignore[misc]

    def _env(self, workspace: Path, scratch: Path, spec: EnvSpec, extra: dict[str, str]) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch / "home"),
                "TMPDIR": str(scratch / "tmp"), "PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPATH": os.pathsep.join(str(workspace / r) for r in spec.src_roots), **extra}

    def run(self, env: PreparedEnv, workspace: Path, request: RunRequest) -> RunOutput:
        if not request.coverage:
            if self._server is None or not self._server.alive():
                self._dir = tempfile.mkdtemp(prefix="tf-host-warm-")
                shutil.copyfile(RUNNER, Path(self._dir, "pytest_runner.py"))
                base = {k: v for k, v in self._env(Path(self._dir), Path(self._dir), env.spec, {}).items()
                        if k != "PYTHONPATH"}
                self._server = start_server([sys.executable], Path(self._dir), base, Path(self._dir))
            ws = Path(workspace).resolve()
            return run_forked(self._server, env.spec, ws, request,
                              lambda scratch: self._env(ws, scratch, env.spec, dict(request.env)))
        return _run_plain(env, workspace, request)


class SubprocessSandbox(_HostEnv):
    """Runs the runner in a subprocess of this interpreter (no isolation: a seam fake, not a sandbox)."""

    name = "subprocess"

    def run(self, env: PreparedEnv, workspace: Path, request: RunRequest) -> RunOutput:
        return _run_plain(env, workspace, request)


def _run_plain(env: PreparedEnv, workspace: Path, request: RunRequest) -> RunOutput:
    """One run in a fresh interpreter: the runner copied alone into a folder (its folder joins sys.path)."""
    start = time.monotonic()
    workspace = Path(workspace).resolve()
    with tempfile.TemporaryDirectory(prefix="tf-host-") as tmp:
        scratch = Path(tmp)
        req = build_request(env.spec, workspace, request, scratch)
        (scratch / "request.json").write_text(json.dumps(req))
        runner = scratch / "runner" / "pytest_runner.py"
        runner.parent.mkdir()
        shutil.copyfile(RUNNER, runner)
        child_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "PYTHONHASHSEED": "0",
                     "TZ": "UTC", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                     "PYTHONPATH": os.pathsep.join(str(workspace / r) for r in env.spec.src_roots),
                     **request.env}
        rc, tail = run_capture([sys.executable, str(runner), str(scratch / "request.json")], request.timeout_s,
                               cwd=workspace, env=child_env, tail=6000)
        report = read_ledger(read_records(Path(req["channel_path"])), exit_code=rc,
                             elapsed=time.monotonic() - start, output_tail=tail, timed_out=rc is None,
                             collect_only=request.collect_only)
        coverage = read_coverage(Path(req["coverage_json"])) if request.coverage and rc is not None else None
    return RunOutput(report, coverage, round(time.monotonic() - start, 3))
