"""The docker session backend: one locked-down container per episode, alive for the whole episode.

Threat model: the test containers' (``sandboxes/docker.py``; the same ``lockdown`` options, checked by
``tests/test_docker_threats.py``): no network, memory/pids/CPU limits, non-root user 65534 with every
capability dropped and ``no-new-privileges``, a read-only root filesystem where only the session's volume
(``/sandbox``: the workspace) and a size-capped ``/tmp`` are writable. In addition, after every command
every process of the user except the container's init is killed (``SHELL_WRAPPER``), so nothing started by
one call runs during the next or while the workspace is read back. The container holds the environment
image (no project code: it was stripped at build) and the broken workspace: no hidden tests, no original
tree, no dataset. Its init is a reaper (zombies of killed processes do not fill the pids limit). The
container carries ``SESSION_LABEL`` (the session id) and ``OWNER_LABEL`` (host and pid of the process that
opened it), so ``taskforge.agent.reaper`` removes containers a crashed run left behind.
"""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path
from typing import Any

import docker.errors
import requests.exceptions

from sandboxes.docker import USER_ID, WORKSPACE, DockerSandbox, docker_client, lockdown
from sandboxes.docker_images import MOUNT, VENV, read_file, tar_bytes, tar_directory
from sandboxes.protocol import RunRequest
from sandboxes.reaper import owner_tag
from taskforge.agent.backend import SHELL_WRAPPER, ShellResult, keep_path, shell_result
from taskforge.core.environment import PreparedEnv
from taskforge.core.errors import SandboxError
from taskforge.core.settings import Settings

SESSION_LABEL = "taskforge.session"
OWNER_LABEL = "taskforge.session.owner"  # sandboxes.reaper.owner_tag() of the process that opened the session
_REAPER_INIT = ("import os, time\nwhile True:\n    try:\n        os.wait()\n"
                "    except ChildProcessError:\n        time.sleep(0.5)\n")


class DockerBackend:
    """``SessionBackend`` over a running container; files move with ``put_archive`` / ``get_archive``."""

    root = WORKSPACE

    def __init__(self, workspace: Path, env: PreparedEnv, settings: Settings, session_id: str,
                 client: Any | None = None) -> None:
        if env.backend != "docker":
            raise SandboxError(f"environment {env.location} was prepared by the {env.backend!r} sandbox; a docker "
                               "session needs one prepared by the docker sandbox")
        self.client = client or docker_client(timeout_s=max(120.0, settings.agent_call_timeout_s + 60))
        self.env = DockerSandbox.environment(env.spec, RunRequest())
        try:
            self.container = self.client.containers.create(
                env.location, [f"{VENV}/bin/python", "-c", _REAPER_INIT], working_dir=WORKSPACE,
                environment=self.env, labels={SESSION_LABEL: session_id, OWNER_LABEL: owner_tag()}, detach=True,
                **lockdown(settings))
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"environment image {env.location} is gone; prepare the environment again") from exc
        except docker.errors.APIError as exc:
            raise SandboxError(f"cannot create a session container from {env.location}: "
                               f"{exc.explanation or exc}") from exc
        try:
            self.container.put_archive(MOUNT, tar_directory(workspace, "workspace", uid=USER_ID))
            self.container.start()
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            self.close()
            raise SandboxError(f"cannot start the session container: {exc}") from exc

    @property
    def host_workspace(self) -> Path | None:
        return None

    def shell(self, command: str, timeout_s: float, max_chars: int) -> ShellResult:
        argv = ["/bin/bash", "-c", SHELL_WRAPPER, "taskforge", f"{timeout_s:g}", command, str(max_chars), "1"]
        start = time.monotonic()
        try:
            got = self.container.exec_run(argv, user=f"{USER_ID}:{USER_ID}", workdir=WORKSPACE,
                                          environment=self.env)
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            return ShellResult(-1, f"[taskforge: the session container failed: {exc}]", False,
                               time.monotonic() - start)
        out = (got.output or b"").decode("utf-8", "replace")
        return shell_result(got.exit_code, out, time.monotonic() - start, timeout_s)

    def read_bytes(self, rel: str) -> bytes | None:
        try:
            return read_file(self.container, f"{WORKSPACE}/{rel}")
        except (docker.errors.NotFound, docker.errors.APIError, FileNotFoundError, tarfile.TarError):
            return None

    def write_bytes(self, rel: str, data: bytes) -> None:
        parts = rel.split("/")
        dirs = ["/".join(parts[:i]) for i in range(1, len(parts))]
        try:
            self.container.put_archive(WORKSPACE, tar_bytes({rel: data}, uid=USER_ID, dirs=dirs))
        except docker.errors.APIError as exc:
            raise ValueError(f"the container refused the write ({exc.explanation or exc})") from exc

    def files(self) -> dict[str, bytes]:
        stream, _ = self.container.get_archive(WORKSPACE)
        out: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            for member in tar:
                rel = member.name.split("/", 1)[1] if "/" in member.name else ""
                if member.isfile() and rel and keep_path(rel) and (fh := tar.extractfile(member)) is not None:
                    out[rel] = fh.read()
        return out

    def close(self) -> None:
        try:
            self.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except (docker.errors.APIError, requests.exceptions.RequestException):
            pass  # the reaper finds it by its label
