"""The SkyRL-Gym env, the verl agent loop and mini-swe-agent, each with the real library, on a real generated task.

A scripted agent applies the task's gold patch through the tools and submits: the grader (the real
reward path, local sandbox) gives 1; the null agent (submit at once) gets 0. Sessions are the fake
session (``session_backend=fake``); the live jailed sessions plug in through the same factory.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.generated_datasets import generated_dataset

pytestmark = [pytest.mark.slow, pytest.mark.realrepo]


@pytest.fixture(scope="module")
def ds() -> Any:
    return generated_dataset("inflection==0.5.1", sandbox="local", strategies=("stub",), max_tasks=2)


def call_text(name: str, **args: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def gold_script(task: Any) -> list[str]:
    return [call_text("create_file", path="gold.patch", content=task.patch),
            call_text("bash", command="git apply gold.patch && rm gold.patch"), call_text("submit")]


# --- SkyRL-Gym -------------------------------------------------------------------------------------
def skyrl_env(ds: Any, task: Any) -> Any:
    skyrl_gym = pytest.importorskip("skyrl_gym", reason="skyrl-gym not installed: pip install 'taskforge[agents]'")
    from taskforge.agent.adapters.skyrl_env import register_env, skyrl_rows

    register_env()
    [row] = [r for r in skyrl_rows(ds.tasks()) if r["reward_spec"]["ground_truth"] == task.instance_id]
    assert row["env_class"] == "taskforge"
    env = skyrl_gym.make(row["env_class"], env_config={"dataset": str(ds.path), "session_backend": "fake",
                                                       "grader": "sandbox"}, extras=row)
    prompt, meta = env.init(row["prompt"])
    assert meta["instance_id"] == task.instance_id and prompt == row["prompt"]
    return env


def test_skyrl_env_gold_agent_gets_1_null_gets_0_unknown_tool_is_structured(ds: Any) -> None:
    task = ds.tasks()[0]
    env = skyrl_env(ds, task)
    out = env.step(call_text("python", code="print(1)"))
    assert not out["done"] and "unknown tool" in out["observations"][0]["content"]
    assert out["metadata"]["error"] == "unknown_tool"
    for action in gold_script(task):
        out = env.step(action)
    assert out["done"] and out["reward"] == 1.0 and out["metadata"]["end_reason"] == "submitted"
    assert env.get_metrics()["errors_unknown_tool"] == 1
    null = skyrl_env(ds, task)
    out = null.step(call_text("submit"))
    assert out["done"] and out["reward"] == 0.0


# --- verl ------------------------------------------------------------------------------------------
class ScriptedServer:
    """verl's ``server_manager.generate`` playing fixed turns (token ids + logprobs, as vLLM returns)."""

    def __init__(self, tokenizer: Any, turns: list[str]) -> None:
        self.tokenizer, self.turns, self.prompts = tokenizer, list(turns), []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **_: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        ids = list(self.tokenizer(self.turns.pop(0), add_special_tokens=False)["input_ids"]) + [
            self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def verl_loop(ds: Any, server: ScriptedServer, tokenizer: Any) -> Any:
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry

    from taskforge.agent.adapters.verl_loop import AGENT_NAME

    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 8192}},
                               "data": {}, "taskforge": {"dataset": str(ds.path), "session_backend": "fake",
                                                         "grader": "sandbox", "max_turns": 6}})
    return hydra.utils.instantiate(config=_agent_loop_registry[AGENT_NAME], trainer_config=DictConfigWrap(config),
                                   server_manager=server, tokenizer=tokenizer, processor=None,
                                   dataset_cls=None, data_config=DictConfigWrap(config.data))


def test_verl_agent_loop_masks_observations_and_sets_reward_score(ds: Any) -> None:
    pytest.importorskip("verl", reason="verl not installed: pip install 'taskforge[agents]'")
    from taskforge.agent.adapters.verl_loop import AGENT_NAME, agent_rows
    from taskforge.rl.policies.hf import chat_tokenizer

    tok = chat_tokenizer()
    task = ds.tasks()[0]
    [row] = [r for r in agent_rows(ds.tasks()) if r["reward_model"]["ground_truth"] == task.instance_id]
    assert row["agent_name"] == AGENT_NAME
    turns = [call_text("nope")] + gold_script(task)
    server = ScriptedServer(tok, turns)
    out = asyncio.run(verl_loop(ds, server, tok).run({"temperature": 1.0}, raw_prompt=row["prompt"], **row))
    assert out.reward_score == 1.0 and out.extra_fields["end_reason"] == "submitted"
    ids, mask = out.response_ids, out.response_mask
    model_text = tok.decode([t for t, m in zip(ids, mask, strict=True) if m], skip_special_tokens=True)
    obs_text = tok.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    assert model_text == "".join(turns)  # every model token is trained, in order, nothing else
    assert "unknown tool 'nope'" in obs_text and "<|im_start|>tool" in obs_text  # observations are masked
    assert all(lp == 0.0 for lp, m in zip(out.response_logprobs, mask, strict=True) if not m)
    assert all(lp == -0.5 for lp, m in zip(out.response_logprobs, mask, strict=True) if m)
    assert server.prompts[1][:len(out.prompt_ids)] == out.prompt_ids  # each turn extends the same context
    assert out.as_dict()["rm_scores"][-1] == 1.0
    null = asyncio.run(verl_loop(ds, ScriptedServer(tok, [call_text("submit")]), tok).run(
        {}, raw_prompt=row["prompt"], **row))
    assert null.reward_score == 0.0


# --- mini-swe-agent --------------------------------------------------------------------------------
@pytest.fixture
def scripted_endpoint() -> Iterator[tuple[str, list[str], list[Any]]]:
    """A fake OpenAI-compatible chat-completions server on localhost that plays ``script`` in order."""
    script: list[str] = []
    seen: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            content = script.pop(0) if script else "```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
            data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": content}}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script, seen
    finally:
        server.shutdown()
        server.server_close()


def test_mini_swe_agent_unmodified_solves_a_task_inside_a_session(ds: Any, scripted_endpoint: Any) -> None:
    pytest.importorskip("minisweagent", reason="mini-swe-agent not installed: pip install 'taskforge[agents]'")
    from taskforge.agent.adapters.mini_swe import run_mini_swe_agent
    from taskforge.agent.adapters.sessions import session_factory
    from taskforge.rl.grading import SandboxGrader

    endpoint, script, seen = scripted_endpoint
    task = ds.tasks()[0]
    script += ["THOUGHT: look\n```mswea_bash_command\nls\n```",
               f"THOUGHT: fix\n```mswea_bash_command\ncat > /tmp/x.patch <<'TASKFORGE_EOF'\n{task.patch}TASKFORGE_EOF\n"
               "git apply /tmp/x.patch\n```",
               "THOUGHT: done\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"]
    with session_factory(ds.path, "fake")(task) as session:
        result = run_mini_swe_agent(session, endpoint=endpoint, model="scripted")
    assert result.exit_status == "Submitted" and result.model_calls == 3 and result.actions == 3
    assert "mswea_bash_command" in seen[0]["messages"][0]["content"]  # mini-swe-agent's own prompts
    assert "<returncode>0</returncode>" in seen[2]["messages"][-1]["content"]
    grader = SandboxGrader(ds.path)
    assert grader.grade([(task, result.patch)])[0].reward == 1.0
    with session_factory(ds.path, "fake")(task) as session:
        null = run_mini_swe_agent(session, endpoint=endpoint, model="scripted")
    assert null.exit_status == "Submitted" and null.patch == ""
    assert grader.grade([(task, null.patch)])[0].reward == 0.0
