"""What the adapters share: a dataset's task by instance id, a session per episode, and the grader.

The reward is never computed in a session: adapters grade ``session.diff()`` with the grader (the
fresh-sandbox reward path, ``taskforge.rl.grading.SandboxGrader``; ``fake`` = gold-patch equality for
tests). Session backends: ``local`` / ``docker`` are the live, locked-down sessions
(``taskforge.agent.environments.dataset_sessions``); ``fake`` is ``FakeSession`` (unconfined, tests only).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from taskforge.agent.protocol import Session
from taskforge.core.errors import ConfigError, DatasetError
from taskforge.core.task import Task
from taskforge.rl.grading import FakeGrader, Grader, SandboxGrader

SESSION_BACKENDS = ("local", "docker", "auto", "fake")


@functools.lru_cache(maxsize=8)
def _tasks(dataset: str) -> dict[str, Task]:
    from taskforge.dataset import Dataset

    return {t.instance_id: t for t in Dataset.open(dataset, verify=False).tasks()}


def dataset_task(dataset: str | Path, instance_id: str) -> Task:
    tasks = _tasks(str(Path(dataset).resolve()))
    if instance_id not in tasks:
        raise DatasetError(f"task {instance_id!r} is not in dataset {dataset}; export the rows from the same "
                           "dataset the adapter is configured with")
    return tasks[instance_id]


def session_factory(dataset: str | Path, backend: str = "local") -> Callable[[Task], Session]:
    """task -> an open session on its broken workspace (module doc)."""
    if backend not in SESSION_BACKENDS:
        raise ConfigError(f"unknown session backend {backend!r}; available: {', '.join(SESSION_BACKENDS)}")
    if backend == "fake":
        from taskforge.agent.fake_session import FakeSession
        from taskforge.rl.policies import dataset_workspaces

        workspaces = dataset_workspaces(dataset)

        def fake(task: Task) -> Session:
            with workspaces(task) as root:
                return FakeSession(task, root)

        return fake
    from taskforge.agent.environments import dataset_sessions

    return dataset_sessions(dataset, backend=backend)


def make_grader(dataset: str | Path, kind: str = "sandbox") -> Grader:
    if kind == "sandbox":
        return SandboxGrader(dataset)
    if kind == "fake":
        return FakeGrader()
    raise ConfigError(f"unknown grader {kind!r}; expected sandbox or fake")
