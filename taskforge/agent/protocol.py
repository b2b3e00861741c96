"""The ``Session`` seam: one live, locked-down sandbox per agent episode.

A session holds the task's *broken* workspace and nothing of the answer. Tools run inside it
(``execute``); the reward is never computed here: ``diff()`` is handed to the fresh-sandbox grader.
Side-effect free: values and protocols only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Protocol

from taskforge.core.task import Task


class ToolError(str, Enum):  # noqa: UP042 (str() and format() of a member stay as they are)
    """Why a tool call could not run; the observation says it in words the model can act on."""

    UNKNOWN_TOOL = "unknown_tool"
    BAD_JSON = "bad_json"
    BAD_ARGUMENTS = "bad_arguments"
    EDIT_NOT_APPLIED = "edit_not_applied"  # str_replace: old text absent or not unique
    TIMEOUT = "timeout"
    SESSION_CLOSED = "session_closed"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call as the model emitted it: ``arguments`` is the raw JSON text (it may be malformed)."""

    name: str
    arguments: str = "{}"
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class Observation:
    """What a tool call returned. ``error`` is set when the call itself was wrong or could not run."""

    output: str
    exit_code: int = 0
    truncated: bool = False
    error: ToolError | None = None
    elapsed_s: float = 0.0
    submitted: bool = False  # the ``submit`` tool was called: the episode ends


class Session(Protocol):
    """A live sandbox for one episode; use as a context manager (``close`` always runs)."""

    task: Task

    @property
    def workspace(self) -> Path | None:
        """The host path of the workspace where a harness (``command`` policy) may work; None for docker."""
        ...

    def execute(self, call: ToolCall) -> Observation: ...

    def diff(self) -> str:
        """The agent's change against the broken workspace, as a ``git apply``-able patch."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Session: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...
