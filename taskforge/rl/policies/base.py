"""The ``Policy`` seam: what proposes patches for a task, its options, and the workspace provider."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from taskforge.core.task import Task
from taskforge.rl.grading import GradedGroup

WorkspaceProvider = Callable[[Task], contextlib.AbstractContextManager[Path]]


class Policy(Protocol):
    name: str

    def propose(self, task: Task, n: int) -> list[str]: ...

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """Everything a policy factory may need; each policy reads its own fields, ``extra`` is free-form."""

    seed: int = 0
    # simulated
    skill: float = 0.0  # initial skill (logit scale)
    learning_rate: float = 0.1  # GRPO step size on the skill parameter
    difficulty_scale: float = 10.0  # item difficulty = scale * score + offset + noise
    difficulty_offset: float = -2.0
    difficulty_noise: float = 0.5  # std of the per-task deviation from the static score
    # command / openai
    command: str = ""  # external agent command line (split with shlex; no shell)
    endpoint: str = ""  # OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"  # name of the environment variable holding the key
    temperature: float = 1.0
    max_tokens: int = 4096
    timeout_s: float = 600.0  # per agent run / per request
    workspace: WorkspaceProvider | None = None  # materialises the broken workspace of a task
    extra: Mapping[str, str] = field(default_factory=dict)  # e.g. hf: model path, lr, ...
    # agentic episodes (openai, command): task -> an open taskforge.agent session, and the episode's budget
    sessions: Callable[[Task], Any] | None = None  # e.g. taskforge.agent.environments.dataset_sessions(dataset)
    budget: Any = None  # taskforge.agent.episode.EpisodeBudget (None: from the agent_* settings)


class _Stateless:
    name = "stateless"

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"name": self.name}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        return None


def dataset_workspaces(dataset_dir: str | Path) -> WorkspaceProvider:
    """A workspace provider that rebuilds a task's broken workspace from the dataset's repo archive."""
    from taskforge.dataset import Dataset

    ds = Dataset.open(dataset_dir, verify=False)

    @contextlib.contextmanager
    def provide(task: Task) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="taskforge-ws-") as tmp:
            yield ds.broken_workspace(task, Path(tmp) / "workspace")

    return provide
