"""The values of one agentic episode: its budget, why it ended, and the record the training log keeps.

``EpisodeBudget`` bounds an episode (model turns, generated tokens, wall clock) and each tool call (time,
output shown to the model); ``EpisodeBudget.from_settings`` reads the ``agent_*`` settings. ``EndReason``
says why the episode stopped. ``EpisodeRecord`` is what reaches the training log and the report: counts,
the end reason and the trajectory monitor's findings (``taskforge.agent.trajectory_monitor``), never the
transcript. Side-effect free: values only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from taskforge.core.settings import Settings
from taskforge.reward.monitor import Finding


class EndReason(StrEnum):
    """Why an episode stopped."""

    SUBMITTED = "submitted"  # the model called ``submit``
    STEP_BUDGET = "step_budget"  # ``max_steps`` model turns done
    TOKEN_BUDGET = "token_budget"  # ``max_tokens`` generated tokens spent
    WALL_CLOCK = "wall_clock"  # ``wall_clock_s`` passed
    ERROR = "error"  # the endpoint or the agent failed (timeout, 5xx, the command exited non-zero)
    FINISHED = "finished"  # an external agent (``command``) exited normally; the model stopped calling tools


@dataclass(frozen=True, slots=True)
class EpisodeBudget:
    """Limits of one episode and of each tool call in it."""

    max_steps: int = 50  # model turns (one chat request each)
    max_tokens: int = 65536  # generated (completion) tokens, all turns together
    wall_clock_s: float = 1800.0  # the whole episode
    call_timeout_s: float = 120.0  # one tool call
    max_output_chars: int = 10000  # of one tool's output shown to the model (head + tail, marker between)

    @classmethod
    def from_settings(cls, settings: Settings) -> EpisodeBudget:
        return cls(settings.agent_max_steps, settings.agent_max_tokens, settings.agent_wall_clock_s,
                   settings.agent_call_timeout_s, settings.agent_output_chars)


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """One episode as the training log keeps it (JSON-serialisable through ``to_dict``)."""

    instance_id: str
    sample: int  # which of the task's G rollouts
    end_reason: EndReason
    steps: int = 0  # model turns
    tool_calls: int = 0
    tool_errors: Mapping[str, int] = field(default_factory=dict)  # ToolError value -> count
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    patch_chars: int = 0  # size of the episode's diff
    findings: tuple[Finding, ...] = ()  # trajectory monitor: ``path`` = tool, ``line`` = turn
    detail: str = ""  # the error, for ``EndReason.ERROR``
    reward: float | None = None  # filled in by the loop once the patch is graded
    step: int = 0  # the training step (filled in by the loop)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["end_reason"] = self.end_reason.value
        d["tool_errors"] = dict(self.tool_errors)
        d["findings"] = [f.to_dict() for f in self.findings]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EpisodeRecord:
        reward = d.get("reward")
        return cls(str(d["instance_id"]), int(d.get("sample", 0)), EndReason(d["end_reason"]),
                   int(d.get("steps", 0)), int(d.get("tool_calls", 0)),
                   {str(k): int(v) for k, v in (d.get("tool_errors") or {}).items()},
                   int(d.get("prompt_tokens", 0)), int(d.get("completion_tokens", 0)), float(d.get("wall_s", 0.0)),
                   int(d.get("patch_chars", 0)), tuple(Finding.from_dict(f) for f in d.get("findings", ())),
                   str(d.get("detail", "")), None if reward is None else float(reward), int(d.get("step", 0)))
