"""mini-swe-agent, unmodified, with every bash action run inside a taskforge session.

``run_mini_swe_agent(session, endpoint=..., model=...)`` builds mini-swe-agent's own ``DefaultAgent``
and ``LitellmTextbasedModel`` from its shipped ``mini_textbased.yaml`` config (the prompts, the
``mswea_bash_command`` action format, the ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` sentinel), pointed
at any OpenAI-compatible endpoint (vLLM, SGLang, a scripted fake), and replaces only the *environment*:
``SessionEnvironment`` satisfies mini-swe-agent's ``Environment`` protocol by sending each action to
``session.execute(ToolCall("bash", ...))``, so the commands run in the session's sandbox (jail or
container), with its time limit and truncation. The result carries the agent's exit status and
``session.diff()``, which the caller grades (the reward is never computed in the session).
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from typing import Any

from taskforge.agent.protocol import Session, ToolCall

SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@dataclass(frozen=True, slots=True)
class SessionEnvConfig:
    cwd: str = ""

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return {"cwd": self.cwd}


class SessionEnvironment:
    """mini-swe-agent's ``Environment`` protocol (``execute``, ``get_template_vars``, ``serialize``)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.config = SessionEnvConfig(str(session.workspace or ""))
        self.actions = 0

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        from minisweagent.exceptions import Submitted

        self.actions += 1
        obs = self.session.execute(ToolCall("bash", json.dumps({"command": str(action.get("command", ""))})))
        out = {"output": obs.output, "returncode": obs.exit_code,
               "exception_info": "" if obs.error is None else f"{obs.error.value}: {obs.output.strip()[:500]}"}
        lines = obs.output.lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SENTINEL and obs.exit_code == 0:
            submission = "".join(lines[1:])
            raise Submitted({"role": "exit", "content": submission,
                             "extra": {"exit_status": "Submitted", "submission": submission}})
        return out

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config.model_dump(), **platform.uname()._asdict(), **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"environment": self.config.model_dump(),
                                    "environment_type": f"{__name__}.SessionEnvironment"}}}


@dataclass(frozen=True, slots=True)
class MiniSweResult:
    exit_status: str
    patch: str
    model_calls: int
    actions: int


def run_mini_swe_agent(session: Session, *, endpoint: str, model: str, api_key: str = "local",
                       step_limit: int = 30, temperature: float = 0.0, timeout_s: float = 120.0) -> MiniSweResult:
    """Run mini-swe-agent's default agent on ``session.task`` (module doc)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its price list online
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    import yaml
    from minisweagent import package_dir
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

    config = yaml.safe_load((package_dir / "config" / "mini_textbased.yaml").read_text())
    agent_cfg = {k: v for k, v in config["agent"].items() if k != "mode"}  # "mode" is the interactive agent's
    agent_cfg.update(step_limit=step_limit, cost_limit=0.0)
    model_cfg = dict(config.get("model", {}))
    model_cfg["model_kwargs"] = {**model_cfg.get("model_kwargs", {}), "api_base": endpoint, "api_key": api_key,
                                 "temperature": temperature, "timeout": timeout_s}
    lm = LitellmTextbasedModel(model_name=f"openai/{model}", cost_tracking="ignore_errors", **model_cfg)
    env = SessionEnvironment(session)
    agent = DefaultAgent(lm, env, **agent_cfg)
    info = agent.run(session.task.problem_statement)
    return MiniSweResult(str(info.get("exit_status", "")), session.diff(), agent.n_calls, env.actions)
