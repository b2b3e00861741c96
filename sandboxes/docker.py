"""The ``docker`` sandbox: one environment image per repository, a fresh locked-down container per run.

Everything goes through the docker SDK (never the ``docker`` CLI). ``prepare`` builds or reuses the
environment image (``sandboxes.docker_images``). ``run`` creates a container from it, copies the
workspace in with ``put_archive`` (an in-memory tar), starts the in-sandbox runner
(``sandboxes/runner/pytest_runner.py``, baked into the image), waits with a wall-clock limit, reads the
report (and coverage) back with ``get_archive`` and removes the container and its volume in every case.

Threat model. The code under test is untrusted but not a kernel exploit. Each claim is checked on a
real engine by ``tests/test_docker_threats.py``:

- *Hangs*: the container is killed at ``RunRequest.timeout_s`` (``wait`` then ``kill``); the report
  says ``timed_out``. Bound: timeout + a few seconds.
- *Fork bombs*: ``pids_limit`` (``Settings.docker_pids``) caps the processes of the container.
- *Memory hogs*: ``mem_limit`` = ``memswap_limit`` (``Settings.docker_memory``, no swap); the kernel's
  OOM killer stops the hog and the report carries the flag ``oom_killed``. ``/tmp`` is a tmpfs whose
  pages count against the same limit. CPU: ``nano_cpus`` (``Settings.docker_cpus``).
- *Network*: ``network_mode="none"``: only a loopback interface, no route out, no DNS.
- *Writes outside the workspace*: the root filesystem is read-only; only ``/sandbox`` (a volume made
  for this run, holding ``workspace/`` and ``io/``) and the tmpfs ``/tmp`` are writable.
- *Privilege*: non-root user 65534, every capability dropped, ``no-new-privileges``.
- *Leftovers and cross-talk*: each run has its own container and anonymous volume, both removed in a
  ``finally`` (also when the run raised or timed out; removal is retried while the daemon is busy);
  concurrent runs share no writable path. A process killed mid-run cannot remove its container, so each
  carries ``OWNER_LABEL`` (``sandboxes.reaper.owner_tag``) and every new ``DockerSandbox`` removes the run
  containers whose owner is gone (``reap_runs``; ``taskforge sandbox reap`` does it by hand).

Not protected against: kernel or container-runtime escapes (the container shares the host kernel; use
gVisor/Kata via the daemon's runtime for that), disk filling inside the run's volume (bounded only by
the host disk and the timeout), side channels (timing, CPU load of neighbours), and a test that
forges its own report from inside the run: that is the reward path's job (canaries, ``flags``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.types import Mount

from sandboxes.docker_images import MOUNT, RUNNER, VENV, EnvImages, read_file, tar_bytes, tar_directory
from sandboxes.ledger import read_ledger
from sandboxes.local import build_request, run_env
from sandboxes.protocol import CoverageContexts, EnvironmentFiles, RunOutput, RunRequest, Sandbox
from sandboxes.reaper import owner_gone, owner_tag
from taskforge.core.environment import EnvSpec, PreparedEnv
from taskforge.core.errors import SandboxError
from taskforge.core.settings import Settings
from taskforge.core.testreport import ReportFlag, TestReport

USER_ID = 65534  # "nobody" in Debian and in python:*-slim
WORKSPACE = f"{MOUNT}/workspace"
IO_DIR = f"{MOUNT}/io"
RUN_LABEL = "taskforge.run"  # every run container carries it (value: a fresh id), for audits
OWNER_LABEL = "taskforge.run.owner"  # sandboxes.reaper.owner_tag() of the process that created it
TMP_SIZE = "256m"
OUTPUT_TAIL = 4000
KILL_GRACE_S = 10.0
REMOVE_TRIES = 5  # a busy daemon answers a force-remove with 409/500 or a read timeout; try again


def docker_client(timeout_s: float = 120.0) -> docker.DockerClient:
    """A client that has answered a ping; ``SandboxError`` with what to do otherwise."""
    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise SandboxError(f"no Docker daemon answers ({exc}); start dockerd "
                           "(sandboxes/scripts/setup_host.sh does) or use --sandbox local") from exc
    return client


def lockdown(settings: Settings) -> dict[str, Any]:
    """The locked-down part of a container's create options (threat model above): shared by test runs
    and agent sessions (``taskforge.agent.session_docker``)."""
    return {"user": f"{USER_ID}:{USER_ID}", "network_mode": "none", "mem_limit": settings.docker_memory,
            "memswap_limit": settings.docker_memory, "pids_limit": settings.docker_pids,
            "nano_cpus": int(settings.docker_cpus * 1e9), "read_only": True,
            "mounts": [Mount(target=MOUNT, source=None, type="volume")],
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={TMP_SIZE},mode=1777"}, "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"], "ipc_mode": "private"}


def docker_available() -> bool:
    try:
        docker_client(timeout_s=10).close()
    except SandboxError:
        return False
    return True


def _regular_files(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's ``data`` filter, for files and folders only (links, e.g. Debian's absolute sitecustomize.py
    link, are left out: the audit reads files)."""
    return tarfile.data_filter(member, dest) if member.isfile() or member.isdir() else None


class DockerSandbox:
    """``Sandbox`` backed by a Docker engine. See the module docstring for the threat model."""

    name = "docker"

    def __init__(self, settings: Settings | None = None, client: docker.DockerClient | None = None) -> None:
        self.settings = settings or Settings.load()
        self.client = client or docker_client()
        self.images = EnvImages(self.client, self.settings)
        self._stdlibs: dict[str, Path | None] = {}
        reap_runs(self.client)

    # --- Sandbox protocol -------------------------------------------------------------------------
    def prepare(self, spec: EnvSpec, repo_dir: Path) -> PreparedEnv:
        return self.images.ensure(spec, repo_dir)

    def run(self, env: PreparedEnv, workspace: Path, request: RunRequest) -> RunOutput:
        started = time.monotonic()
        if env.backend != "docker":
            raise SandboxError(f"environment {env.location} was prepared by the {env.backend!r} sandbox; "
                               "prepare it with the docker sandbox")
        if not workspace.is_dir():
            raise SandboxError(f"workspace {workspace} is not a directory")
        container = self._create(env, request)
        try:
            self._copy_in(container, workspace, self.request_payload(env.spec, request), request.read_only)
            report, coverage = self._execute(container, request)
        finally:
            self._remove(container)
        return RunOutput(report=report, coverage=coverage, seconds=time.monotonic() - started)

    def warm(self) -> Sandbox:
        return self  # every run is a fresh container from the image

    def clone_env(self, env: PreparedEnv, scratch: Path) -> PreparedEnv:
        return env  # containers never change their image

    def environment_files(self, env: PreparedEnv) -> EnvironmentFiles:
        stdlib = self.stdlib_of(env.location)
        return EnvironmentFiles(image=env.location, base_image=env.extra.get("base_image_id"), stdlib=stdlib)

    def stdlib_of(self, image: str) -> Path | None:
        """The standard library the image's interpreter imports, copied out once to ``work_dir/audit-images``
        (the leak audit's ``interpreter`` channel: it lives in the base image's layers, which the image
        channel does not read). None, with the reason logged, when it cannot be copied."""
        cached = self._stdlibs.get(image)
        if cached is not None or image in self._stdlibs:
            return cached
        try:
            tag = self.client.images.get(image).id.split(":")[-1][:16]
            dest = Path(self.settings.work_dir) / "audit-images" / f"stdlib-{tag}"
            if not (dest / "os.py").is_file():
                where = self.client.containers.run(image, [f"{VENV}/bin/python", "-c", "import sysconfig; print("
                                                   "sysconfig.get_paths()['stdlib'])"], remove=True,
                                                   network_disabled=True, user=f"{USER_ID}:{USER_ID}")
                path = where.decode().strip()
                container = self.client.containers.create(image, ["true"])
                try:
                    stream, _stat = container.get_archive(path)
                    partial = dest.with_name(dest.name + f".{os.getpid()}.part")
                    shutil.rmtree(partial, ignore_errors=True)
                    partial.mkdir(parents=True)
                    with tempfile.TemporaryFile() as buf:
                        for chunk in stream:
                            buf.write(chunk)
                        buf.seek(0)
                        with tarfile.open(fileobj=buf) as tar:
                            tar.extractall(partial, filter=_regular_files)
                    inner = partial / Path(path).name
                    with contextlib.suppress(OSError):
                        inner.rename(dest)
                    shutil.rmtree(partial, ignore_errors=True)
                finally:
                    self._remove(container)
            self._stdlibs[image] = dest if (dest / "os.py").is_file() else None
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError, tarfile.TarError) as exc:
            print(f"taskforge: the standard library of {image} could not be copied out for the leak audit "
                  f"(its interpreter channel is not searched): {exc}", file=sys.stderr)
            self._stdlibs[image] = None
        return self._stdlibs[image]

    # --- pieces of a run ------------------------------------------------------------------------
    @staticmethod
    def request_payload(spec: EnvSpec, request: RunRequest) -> dict[str, Any]:
        """The runner's request.json, built as the local sandbox builds it (container paths)."""
        return {**build_request(spec, Path(WORKSPACE), request, Path(IO_DIR)), "channel_fd": 1,
                "log_path": f"{IO_DIR}/output.log"}

    @staticmethod
    def environment(spec: EnvSpec, request: RunRequest) -> dict[str, str]:
        """The run's whole environment, as the local sandbox sets it; scratch HOME/TMPDIR = the tmpfs."""
        env = run_env(spec, Path(WORKSPACE), Path(VENV), Path("/tmp"), {})
        env.update(HOME="/tmp", TMPDIR="/tmp")
        env.update(request.env)
        return env

    def _create(self, env: PreparedEnv, request: RunRequest) -> Any:
        try:
            return self.client.containers.create(
                env.location,
                [f"{VENV}/bin/python", RUNNER, f"{IO_DIR}/request.json"],
                working_dir=WORKSPACE,
                environment=self.environment(env.spec, request),
                labels={RUN_LABEL: uuid.uuid4().hex, OWNER_LABEL: owner_tag()},
                detach=True,
                **lockdown(self.settings),
            )
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"environment image {env.location} is gone; prepare the environment again") from exc
        except docker.errors.APIError as exc:
            raise SandboxError(f"cannot create a container from {env.location}: {exc.explanation or exc}") from exc

    def _copy_in(self, container: Any, workspace: Path, payload: Mapping[str, Any],
                 read_only: tuple[str, ...] = ()) -> None:
        io_tar = tar_bytes({"io/request.json": json.dumps(payload).encode()}, uid=USER_ID, dirs=("io",))
        container.put_archive(MOUNT, tar_directory(workspace, "workspace", uid=USER_ID, extra_tar=io_tar,
                                                   read_only=read_only))

    def _execute(self, container: Any, request: RunRequest) -> tuple[TestReport, CoverageContexts | None]:
        started = time.monotonic()
        container.start()
        timed_out = False
        try:
            container.wait(timeout=max(1.0, request.timeout_s))
        except requests.exceptions.RequestException:
            timed_out = True
            _kill(container)
            with contextlib.suppress(requests.exceptions.RequestException):
                container.wait(timeout=KILL_GRACE_S)
        duration = time.monotonic() - started
        container.reload()
        state = container.attrs.get("State", {})
        exit_code = int(state.get("ExitCode", -1))
        oom = bool(state.get("OOMKilled"))
        records = container.logs(stdout=True, stderr=False)  # the channel: the runner's original stdout
        stderr = container.logs(stdout=False, stderr=True, tail=50).decode("utf-8", "replace")
        logs = (_read_log(container) + stderr)[-OUTPUT_TAIL:]
        if timed_out or oom:
            why = f"timed out after {request.timeout_s:.0f}s, killed" if timed_out else "killed"
            if oom:
                why += f"; out of memory (limit {self.settings.docker_memory})"
            logs = f"{logs}\n[taskforge: {why}]".lstrip()
        report = read_ledger(records, exit_code=None if timed_out else exit_code, elapsed=duration,
                             output_tail=logs, timed_out=timed_out, collect_only=request.collect_only)
        if oom:
            report = _replace(report, flags=(*report.flags, ReportFlag.OOM_KILLED))
        coverage = _read_coverage(container) if request.coverage and not timed_out else None
        return report, coverage

    def _remove(self, container: Any) -> None:
        _remove_container(container)


def reap_runs(client: docker.DockerClient) -> list[str]:
    """Remove the run containers (and their volumes) whose owner process is gone, and unowned exited ones
    (made before ``OWNER_LABEL``); the ids removed. Best effort: a daemon error reaps nothing."""
    try:
        found = client.containers.list(all=True, filters={"label": RUN_LABEL})
    except (docker.errors.APIError, requests.exceptions.RequestException):
        return []
    gone = []
    for container in found:
        owner = str(container.labels.get(OWNER_LABEL, ""))
        if owner_gone(owner) if owner else container.status == "exited":
            if _remove_container(container, tries=1):
                gone.append(str(container.id))
    return gone


def _remove_container(container: Any, tries: int = REMOVE_TRIES) -> bool:
    """Force-remove ``container`` and its volume; False when the daemon kept refusing (``reap_runs`` of a
    later run removes it once this process is gone)."""
    for attempt in range(tries):
        try:
            container.remove(force=True, v=True)
            return True
        except docker.errors.NotFound:
            return True
        except (docker.errors.APIError, requests.exceptions.RequestException):
            if attempt + 1 < tries:
                time.sleep(0.5 * 2 ** attempt)
    return False


def _kill(container: Any) -> None:
    try:
        container.kill()
    except docker.errors.APIError:  # exited between the timeout and the kill
        pass


def _read_log(container: Any) -> str:
    try:
        return read_file(container, f"{IO_DIR}/output.log").decode("utf-8", "replace")[-OUTPUT_TAIL:]
    except (docker.errors.NotFound, FileNotFoundError, ValueError):
        return ""


def _read_coverage(container: Any) -> CoverageContexts | None:
    try:
        raw = json.loads(read_file(container, f"{IO_DIR}/coverage.json"))
    except (docker.errors.NotFound, FileNotFoundError, ValueError):
        return None
    return {path: {int(line): tuple(ids) for line, ids in lines.items()} for path, lines in raw.items()}


def _replace(report: TestReport, **changes: Any) -> TestReport:
    return dataclasses.replace(report, **changes)
