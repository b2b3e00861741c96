"""``open_session``: a live ``Session`` (``taskforge.agent.protocol``) on the local jail or a docker container.

    with open_session(task, backend="local", workspace_provider=ws, environment=envs) as s:
        s.execute(ToolCall("bash", '{"command": "ls"}'))
        patch = s.diff()          # graded elsewhere: taskforge.rl.grading.SandboxGrader

The session copies the task's broken workspace (from ``workspace_provider``, e.g.
``taskforge.rl.policies.dataset_workspaces``) into its own directory, keeps the pristine files in memory
for ``diff``, and hands the workspace to a backend (``session_local`` or ``session_docker``, each states its
threat model) with the task's prepared environment (``environment``: a ``PreparedEnv`` or a function of the
task, e.g. ``taskforge.agent.environments.dataset_environments``). It holds nothing of the answer. Tools
are ``taskforge.agent.tools``; the reward is never computed here. A session is a context manager; what a
crashed run leaves is removed by ``taskforge.agent.reaper`` (the next ``open_session`` reaps first).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from taskforge.agent.backend import SessionBackend, tree_files
from taskforge.agent.episode import EpisodeBudget
from taskforge.agent.protocol import Observation, ToolCall, ToolError
from taskforge.agent.reaper import reap, remove_record, write_record
from taskforge.agent.tools import TOOLS, Tool, dispatch
from taskforge.core.environment import PreparedEnv
from taskforge.core.errors import ConfigError, PatchError
from taskforge.core.files import copy_ignore
from taskforge.core.patches import diff_file
from taskforge.core.settings import Settings
from taskforge.core.task import Task

BACKENDS = ("local", "docker")
WorkspaceProvider = Callable[[Task], contextlib.AbstractContextManager[Path]]
EnvironmentProvider = Callable[[Task], PreparedEnv]


class SandboxSession:
    """A ``Session`` over a ``SessionBackend``; see the module doc."""

    def __init__(self, task: Task, backend: SessionBackend, pristine: dict[str, bytes], budget: EpisodeBudget,
                 session_id: str, directory: Path, tools: dict[str, Tool] | None = None) -> None:
        self.task = task
        self.backend = backend
        self.budget = budget
        self.session_id = session_id
        self.directory = directory
        self.tools = tools or dict(TOOLS)
        self._pristine = pristine
        self._closed = False

    @property
    def workspace(self) -> Path | None:
        return self.backend.host_workspace

    @property
    def root(self) -> str:
        """The workspace path as the agent's commands see it."""
        return self.backend.root

    def execute(self, call: ToolCall) -> Observation:
        if self._closed:
            return Observation("the session is closed", -1, error=ToolError.SESSION_CLOSED)
        start = time.monotonic()
        obs = dispatch(call, self.backend, self.task, self.budget, self.tools)
        return obs if obs.elapsed_s else replace(obs, elapsed_s=time.monotonic() - start)

    def diff(self) -> str:
        """A ``git apply``-able patch from the broken workspace to the current one (text files only)."""
        if self._closed:
            raise ConfigError("diff() of a closed session; take the diff before close()")
        return text_diff(self._pristine, self.backend.files())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.backend.close()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
            remove_record(self.session_id)

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def text_diff(before: dict[str, bytes], after: dict[str, bytes]) -> str:
    """The patch between two file sets; files that are not UTF-8 or whose path a patch cannot carry are left out."""
    def text(data: bytes | None) -> str | None:
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    out = []
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path), after.get(path)
        if a == b or (a is not None and text(a) is None) or (b is not None and text(b) is None):
            continue
        with contextlib.suppress(PatchError):
            out.append(diff_file(path, text(a), text(b)))
    return "".join(out)


def open_session(task: Task, *, backend: str = "local", settings: Settings | None = None,
                 workspace_provider: WorkspaceProvider, environment: PreparedEnv | EnvironmentProvider,
                 budget: EpisodeBudget | None = None, docker_client: object | None = None) -> SandboxSession:
    """Open a session on ``backend`` for ``task`` (see the module doc); close it (or use ``with``)."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown session backend {backend!r}; available: {', '.join(BACKENDS)}")
    settings = settings or Settings.load()
    budget = budget or EpisodeBudget.from_settings(settings)
    reap(docker_client)
    session_id = uuid.uuid4().hex[:16]
    directory = Path(tempfile.mkdtemp(prefix=f"taskforge-session-{session_id}-"))
    write_record(session_id, dir=str(directory), backend=backend)
    try:
        workspace = directory / "workspace"
        with workspace_provider(task) as broken:
            shutil.copytree(broken, workspace, symlinks=True, ignore=copy_ignore)
        pristine = tree_files(workspace)
        env = environment if isinstance(environment, PreparedEnv) else environment(task)
        chosen: SessionBackend
        if backend == "local":
            from taskforge.agent.session_local import LocalBackend

            directory.chmod(0o755)
            chosen = LocalBackend(workspace, env, settings)
        else:
            from taskforge.agent.session_docker import DockerBackend

            chosen = DockerBackend(workspace, env, settings, session_id, docker_client)
            write_record(session_id, container=chosen.container.id)
            shutil.rmtree(workspace)  # the container holds the workspace now
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        remove_record(session_id)
        raise
    return SandboxSession(task, chosen, pristine, budget, session_id, directory)
