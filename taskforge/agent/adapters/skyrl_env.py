"""A SkyRL-Gym text environment over a taskforge session, registered as ``taskforge``.

Rows (``skyrl_rows``) are the verl export's rows plus ``env_class: "taskforge"`` and ``reward_spec``
(``{"method": "rule", "ground_truth": instance_id}``). SkyRL builds the env per row as
``skyrl_gym.make("taskforge", env_config=cfg, extras=row)``; ``cfg`` may set ``dataset`` (the dataset
directory, required), ``session_backend`` (local | docker | auto | fake), ``grader`` (sandbox | fake)
and ``max_turns``.

Episode: ``init`` opens the session; each ``step(action)`` parses one ``<tool_call>`` from the model's
text (``taskforge.agent.hf_episode.parse_tool_call``), runs it in the session and returns the
observation as a ``tool`` message. The episode ends on ``submit`` or after ``max_turns``; only then is
the reward computed, by the grader on ``session.diff()`` (never in the session), and the session closed.
Intermediate rewards are 0. ``get_metrics`` reports turns, tool errors by kind and the end reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from taskforge.agent.adapters.sessions import dataset_task, make_grader, session_factory
from taskforge.agent.hf_episode import parse_tool_call
from taskforge.agent.protocol import Observation, Session, ToolCall
from taskforge.core.errors import ConfigError
from taskforge.core.task import Task

ENV_CLASS = "taskforge"


def register_env() -> None:
    """Register ``TaskforgeEnv`` with SkyRL-Gym as ``taskforge`` (idempotent; call in every worker)."""
    from skyrl_gym.envs.registration import register, registry

    if ENV_CLASS not in registry:
        register(id=ENV_CLASS, entry_point=f"{__name__}:TaskforgeEnv")


def skyrl_rows(tasks: list[Task], split: str = "train") -> list[dict[str, object]]:
    from taskforge.dataset.export_verl import verl_rows

    return [{**row, "env_class": ENV_CLASS,
             "reward_spec": {"method": "rule", "ground_truth": row["reward_model"]["ground_truth"]}}  # type: ignore[index]
            for row in verl_rows(tasks, split)]


def _get(cfg: Any, key: str, default: Any) -> Any:
    if cfg is None:
        return default
    value = cfg.get(key, default) if hasattr(cfg, "get") else getattr(cfg, key, default)
    return default if value is None else value


class TaskforgeEnv(BaseTextEnv):
    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        extras = dict(extras or {})
        spec = extras.get("reward_spec") or {}
        dataset = _get(env_config, "dataset", "") or (extras.get("extra_info") or {}).get("dataset", "")
        if not spec.get("ground_truth") or not dataset:
            raise ConfigError("taskforge env needs reward_spec.ground_truth (the instance id) in the row and "
                              "env_config.dataset (the dataset directory); build rows with skyrl_rows()")
        self.task = dataset_task(dataset, str(spec["ground_truth"]))
        self.max_turns = int(_get(env_config, "max_turns", extras.get("max_turns", 16)))
        self._sessions = session_factory(dataset, str(_get(env_config, "session_backend", "local")))
        self._grader = make_grader(dataset, str(_get(env_config, "grader", "sandbox")))
        self.session: Session | None = None
        self.errors: Counter[str] = Counter()
        self.end_reason = ""
        self.patch = ""

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        self.session = self._sessions(self.task)
        return prompt, {"instance_id": self.task.instance_id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if self.session is None:
            raise ConfigError("TaskforgeEnv.step before init(); SkyRL calls init(prompt) first")
        self.turns += 1
        parsed = parse_tool_call(action)
        obs = self.session.execute(parsed) if isinstance(parsed, ToolCall) else parsed
        if obs.error is not None:
            self.errors[obs.error.value] += 1
        done = obs.submitted or self.turns >= self.max_turns
        if not done:
            return BaseTextEnvStepOutput(observations=[{"role": "tool", "content": _shown(obs)}], reward=0.0,
                                         done=False, metadata={"error": obs.error.value if obs.error else ""})
        self.end_reason = "submitted" if obs.submitted else "max_turns"
        self.patch = self.session.diff()
        self.close()
        grade = self._grader.grade([(self.task, self.patch)])[0]
        return BaseTextEnvStepOutput(observations=[], reward=float(grade.reward), done=True,
                                     metadata={"end_reason": self.end_reason, "grade": grade.to_dict()})

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def get_metrics(self) -> dict[str, Any]:
        return {"turns": self.turns, "submitted": float(self.end_reason == "submitted"),
                **{f"errors_{k}": v for k, v in self.errors.items()}}


def _shown(obs: Observation) -> str:
    return obs.output if obs.error is None else f"error ({obs.error.value}): {obs.output}"
