"""A verl agent loop over a taskforge session, registered as ``taskforge_agent``.

Rows (``agent_rows``) are the verl export's rows plus ``agent_name: "taskforge_agent"``; verl's
``AgentLoopWorker`` instantiates the registered class by that name and calls ``run(sampling_params,
**row)``. Configure it under ``+taskforge`` in the trainer config: ``dataset`` (required),
``session_backend`` (local | docker | auto | fake), ``grader`` (sandbox | fake), ``max_turns``.

``run``: the chat-templated prompt, then up to ``max_turns`` of (generate through verl's
``server_manager`` -> parse one ``<tool_call>`` -> execute it in the session -> append the tool
message). ``response_ids`` holds every model token and every observation token in order;
``response_mask`` is 1 on model tokens and 0 on observation tokens (so verl's loss skips them) and
``response_logprobs`` carries the server's sampling logprobs (0 on observations). The reward is the
grader's reward of ``session.diff()``, set as ``reward_score`` (verl turns it into ``rm_scores`` on the
last token). Blocking session and grading calls run in a thread so the event loop keeps serving other
episodes.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from taskforge.agent.adapters.sessions import dataset_task, make_grader, session_factory
from taskforge.agent.hf_episode import parse_tool_call
from taskforge.agent.protocol import ToolCall
from taskforge.core.errors import ConfigError
from taskforge.core.task import Task

AGENT_NAME = "taskforge_agent"


def agent_rows(tasks: list[Task], split: str = "train") -> list[dict[str, object]]:
    from taskforge.dataset.export_verl import verl_rows

    return [{**row, "agent_name": AGENT_NAME} for row in verl_rows(tasks, split)]


def _instance_id(row: dict[str, Any]) -> str:
    rm, info = row.get("reward_model") or {}, row.get("extra_info") or {}
    iid = (rm.get("ground_truth") if isinstance(rm, dict) else None) or (info.get("instance_id")
                                                                         if isinstance(info, dict) else None)
    if not iid:
        raise ConfigError("taskforge agent loop: the row has no reward_model.ground_truth / extra_info.instance_id; "
                          "build rows with agent_rows()")
    return str(iid)


@register(AGENT_NAME)
class TaskforgeAgentLoop(AgentLoopBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg = self.config.get("taskforge", None) or {}
        self.dataset = str(cfg.get("dataset", "") or "")
        if not self.dataset:
            raise ConfigError("set +taskforge.dataset=DIR (the dataset directory) in the verl config")
        self.max_turns = int(cfg.get("max_turns", 16))
        self.response_length = int(self.rollout_config.response_length)
        self.sessions = session_factory(self.dataset, str(cfg.get("session_backend", "local")))
        self.grader = make_grader(self.dataset, str(cfg.get("grader", "sandbox")))

    def _encode(self, messages: list[dict[str, str]], generation_prompt: bool) -> list[int]:
        tok: Any = self.tokenizer
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
        return list(tok(text, add_special_tokens=False)["input_ids"])

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        tok: Any = self.tokenizer
        task = dataset_task(self.dataset, _instance_id(kwargs))
        prompt_ids = self._encode(list(kwargs["raw_prompt"]), True)
        ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        turns, reason = 0, "max_turns"
        request_id = uuid.uuid4().hex
        session = await asyncio.to_thread(self.sessions, task)
        try:
            while turns < self.max_turns and len(ids) < self.response_length:
                out = await self.server_manager.generate(request_id=request_id, prompt_ids=prompt_ids + ids,
                                                         sampling_params=sampling_params)
                new = list(out.token_ids)
                ids += new
                mask += [1] * len(new)
                logprobs += list(out.log_probs) if out.log_probs else [0.0] * len(new)
                turns += 1
                parsed = parse_tool_call(tok.decode(new, skip_special_tokens=True))
                obs = await asyncio.to_thread(session.execute, parsed) if isinstance(parsed, ToolCall) else parsed
                if obs.submitted:
                    reason = "submitted"
                    break
                ended = bool(new) and new[-1] == tok.eos_token_id
                end = tok("\n" if ended else f"{tok.eos_token or ''}\n", add_special_tokens=False)["input_ids"]
                shown = obs.output if obs.error is None else f"error ({obs.error.value}): {obs.output}"
                obs_ids = list(end) + self._encode([{"role": "tool", "content": shown}], True)
                ids += obs_ids
                mask += [0] * len(obs_ids)
                logprobs += [0.0] * len(obs_ids)
            patch = await asyncio.to_thread(session.diff)
        finally:
            await asyncio.to_thread(session.close)
        grade = (await asyncio.to_thread(self.grader.grade, [(task, patch)]))[0]
        n = self.response_length
        return AgentLoopOutput(prompt_ids=prompt_ids, response_ids=ids[:n], response_mask=mask[:n],
                               response_logprobs=logprobs[:n], reward_score=float(grade.reward),
                               num_turns=2 * turns + 1, metrics=AgentLoopMetrics(),
                               extra_fields={"end_reason": reason, "instance_id": task.instance_id,
                                             "grade": grade.to_dict()})
