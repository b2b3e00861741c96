"""One multi-turn tool-calling episode against an OpenAI-compatible endpoint, in a live session.

    messages = [system, user(problem statement, repository root)]
    repeat until submit or a budget ends it:
        reply = endpoint(messages, tools)                  # one assistant turn
        for each tool call: observation = session.execute(call); monitor the call
        messages += [assistant turn, one tool message per call]  (a nudge when the turn called no tool)
    patch = session.diff()                                 # graded elsewhere, in a fresh sandbox

Budgets (``EpisodeBudget``): ``max_steps`` turns, ``max_tokens`` generated tokens (the endpoint's usage, else
estimated at 4 characters a token), ``wall_clock_s`` for the episode (each request's timeout is cut to what
is left). Why it ended is an ``EndReason`` in the ``EpisodeRecord``, with the trajectory monitor's findings.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from taskforge.agent.chat_client import ChatClient
from taskforge.agent.episode import EndReason, EpisodeBudget, EpisodeRecord
from taskforge.agent.protocol import Observation
from taskforge.agent.session import SandboxSession
from taskforge.agent.tools import schemas
from taskforge.agent.trajectory_monitor import scan_call
from taskforge.core.task import Task
from taskforge.reward.monitor import Finding

SYSTEM_PROMPT = ("You are an expert software engineer working in a repository through tools. A feature was removed "
                 "from the repository; implement it so that its tests pass. Explore with bash and view_file, edit "
                 "with str_replace or create_file, check with run_tests, and call submit when you are done. "
                 "There is no network.")
NUDGE = "Call one of the tools (bash, view_file, str_replace, create_file, run_tests) or submit when you are done."
MAX_FINDINGS = 50  # per episode record


def user_prompt(task: Task, root: str) -> str:
    return (f"Repository: {task.repo} ({task.version}), checked out at {root}.\n\n"
            f"Problem statement:\n{task.problem_statement}")


def render(obs: Observation) -> str:
    """An observation as the content of a tool message."""
    head = f"[error: {obs.error.value}] " if obs.error else ""
    tail = "" if obs.error or obs.exit_code == 0 else f"\n[exit code {obs.exit_code}]"
    return f"{head}{obs.output}{tail}"


def run_chat_episode(session: SandboxSession, client: ChatClient, budget: EpisodeBudget, *, sample: int = 0,
                     system_prompt: str = SYSTEM_PROMPT) -> tuple[str, EpisodeRecord]:
    """Run one episode in ``session`` (module doc); (the patch, the record)."""
    task = session.task
    start = time.monotonic()
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt},
                                      {"role": "user", "content": user_prompt(task, session.root)}]
    tools = schemas(session.tools)
    prompt_tokens = completion_tokens = calls = steps = 0
    errors: Counter[str] = Counter()
    findings: list[Finding] = []
    reason, detail = EndReason.STEP_BUDGET, ""
    while True:
        left = budget.wall_clock_s - (time.monotonic() - start)
        if steps >= budget.max_steps:
            reason = EndReason.STEP_BUDGET
            break
        if left <= 0:
            reason = EndReason.WALL_CLOCK
            break
        if completion_tokens >= budget.max_tokens:
            reason = EndReason.TOKEN_BUDGET
            break
        reply = client.complete(messages, tools, max_tokens=budget.max_tokens - completion_tokens, timeout_s=left,
                                turn=steps)
        if reply is None:
            reason = EndReason.WALL_CLOCK if time.monotonic() - start >= budget.wall_clock_s else EndReason.ERROR
            detail = "" if reason is EndReason.WALL_CLOCK else "the endpoint gave no answer (timeout, 5xx or junk)"
            break
        steps += 1
        prompt_tokens += reply.prompt_tokens
        completion_tokens += reply.completion_tokens
        messages.append(reply.message())
        if not reply.tool_calls:
            messages.append({"role": "user", "content": NUDGE})
            continue
        submitted = False
        for call in reply.tool_calls:
            calls += 1
            findings.extend(scan_call(call, steps))
            obs = session.execute(call)
            if obs.error is not None:
                errors[obs.error.value] += 1
            messages.append({"role": "tool", "tool_call_id": call.call_id, "content": render(obs)})
            submitted = submitted or obs.submitted
        if submitted:
            reason = EndReason.SUBMITTED
            break
    patch = session.diff()
    record = EpisodeRecord(task.instance_id, sample, reason, steps, calls, dict(sorted(errors.items())),
                           prompt_tokens, completion_tokens, round(time.monotonic() - start, 3), len(patch),
                           tuple(findings[:MAX_FINDINGS]), detail)
    return patch, record
