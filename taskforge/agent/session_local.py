"""The local session backend: every tool command runs in the bubblewrap jail (``sandboxes.isolation``).

Threat model (the jail's, per call; see ``sandboxes/isolation.py`` for each claim and its attack test):
the jail sees only the system directories, the environment's venv (read-only) and the session's workspace
(read-write); no network, no host processes, capped memory and processes, a fresh ``/tmp`` per call, and
every process a call started is dead when it returns. Nothing of the answer is there: the workspace is
the broken one, the venv holds no project code, and the original tree, hidden tests and dataset stay on
the host outside every bind. File tools run in this process on the host; they resolve each path and
refuse one whose real location is outside the workspace (a symlink the agent planted), and, as no process
of the agent survives a call, nothing can swap a path between the check and the use.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from sandboxes import isolation
from sandboxes.local import run_env
from taskforge.agent.backend import SHELL_WRAPPER, ShellResult, shell_result, tree_files
from taskforge.core.environment import PreparedEnv
from taskforge.core.errors import SandboxError
from taskforge.core.settings import Settings


class LocalBackend:
    """``SessionBackend`` over a host directory, commands confined by bubblewrap."""

    def __init__(self, workspace: Path, env: PreparedEnv, settings: Settings) -> None:
        if env.backend != "local":
            raise SandboxError(f"environment {env.location} was prepared by the {env.backend!r} sandbox; a local "
                               "session needs one prepared by the local sandbox")
        self.support = isolation.probe()
        if not self.support.usable:
            raise SandboxError(f"a local session cannot confine commands here: {self.support.reason}; "
                               "or open the session with backend='docker'")
        self.workspace = Path(workspace).resolve()
        self.root = str(self.workspace)
        venv = Path(env.location)
        self.mounts = isolation.Mounts.of(ro=isolation.python_mounts(venv), rw=[self.workspace],
                                          hidden=isolation.python_hidden(venv))
        self.limits = isolation.Limits(memory_mb=settings.local_memory_mb, pids=settings.local_pids)
        self.env = {**run_env(env.spec, self.workspace, venv, Path("/tmp"), {}), "HOME": "/tmp", "TMPDIR": "/tmp"}
        if self.support.host_uid != 0:  # the rlimit fallback runs commands as an unprivileged host uid
            for d, _dirs, files in os.walk(self.workspace):
                os.chmod(d, 0o777)
                for f in files:
                    if not os.path.islink(p := os.path.join(d, f)):
                        os.chmod(p, 0o666)

    @property
    def host_workspace(self) -> Path | None:
        return self.workspace

    def shell(self, command: str, timeout_s: float, max_chars: int) -> ShellResult:
        argv = ["/bin/bash", "-c", SHELL_WRAPPER, "taskforge", f"{timeout_s:g}", command, str(max_chars), "0"]
        start = time.monotonic()
        rc, out = isolation.run_isolated(argv, timeout_s + 15, cwd=self.workspace, env=self.env,
                                         tail=4 * max_chars + 4096, mounts=self.mounts, limits=self.limits,
                                         support=self.support)
        return shell_result(rc, out, time.monotonic() - start, timeout_s)

    def _inside(self, rel: str) -> Path:
        path = self.workspace / rel
        real = Path(os.path.realpath(path))
        if real != self.workspace and self.workspace not in real.parents:
            raise ValueError(f"{rel} leads outside the repository (a symlink?)")
        return real

    def read_bytes(self, rel: str) -> bytes | None:
        try:
            real = self._inside(rel)
        except ValueError:
            return None
        return real.read_bytes() if real.is_file() else None

    def write_bytes(self, rel: str, data: bytes) -> None:
        real = self._inside(rel)
        parent = self._inside(str(Path(rel).parent))
        parent.mkdir(parents=True, exist_ok=True)
        if real.is_dir():
            raise ValueError(f"{rel} is a directory")
        real.write_bytes(data)
        if self.support.host_uid != 0:
            os.chmod(real, 0o666)

    def files(self) -> dict[str, bytes]:
        return tree_files(self.workspace)

    def close(self) -> None:
        return None  # nothing runs between calls; the session removes the directory
