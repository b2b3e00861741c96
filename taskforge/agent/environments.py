"""Where sessions of a dataset's tasks get their environment and workspace: ``dataset_sessions``.

The environment (venv or image, no project code in it) is prepared by the sandbox backend from the
task's original tree, materialised in a host directory that no session ever binds and removed right
after; environments are cached by the backend (and per process by ``EnvCache``), so only the first
session of a repository pays for the build.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from taskforge.agent.episode import EpisodeBudget
from taskforge.agent.session import EnvironmentProvider, SandboxSession, open_session
from taskforge.core.environment import PreparedEnv
from taskforge.core.errors import ConfigError
from taskforge.core.settings import Settings
from taskforge.core.task import Task

SessionFactory = Callable[[Task], SandboxSession]


def dataset_environments(dataset_dir: str | Path, backend: str, settings: Settings) -> EnvironmentProvider:
    """task -> its ``PreparedEnv`` on ``backend`` ("local" or "docker"), built from the dataset's repo archive."""
    from taskforge.reward.reward import EnvCache
    from taskforge.reward.workspace import DatasetTrees

    if backend == "local":
        from sandboxes.local import LocalSandbox

        sandbox: object = LocalSandbox(settings)
    elif backend == "docker":
        from sandboxes.docker import DockerSandbox

        sandbox = DockerSandbox(settings)
    else:
        raise ConfigError(f"unknown session backend {backend!r}; available: local, docker")
    trees, cache = DatasetTrees(Path(dataset_dir)), EnvCache()

    def environment(task: Task) -> PreparedEnv:
        with tempfile.TemporaryDirectory(prefix="taskforge-env-src-") as tmp:
            original = Path(tmp, "original")
            original.mkdir()
            trees.materialize(task, original)
            return cache.get(sandbox, task, original)  # type: ignore[arg-type]

    return environment


def dataset_sessions(dataset_dir: str | Path, *, backend: str = "local", settings: Settings | None = None,
                     budget: EpisodeBudget | None = None) -> SessionFactory:
    """task -> an open session on its broken workspace (from the dataset's archive) and its environment."""
    from taskforge.rl.policies.base import dataset_workspaces

    settings = settings or Settings.load()
    if backend == "auto":
        from sandboxes.docker import docker_available

        backend = "docker" if docker_available() else "local"
    workspaces = dataset_workspaces(dataset_dir)
    environments = dataset_environments(dataset_dir, backend, settings)

    def session(task: Task) -> SandboxSession:
        return open_session(task, backend=backend, settings=settings, workspace_provider=workspaces,
                            environment=environments, budget=budget)

    return session
