"""``openai``: an OpenAI-compatible chat-completions endpoint (vLLM, SGLang, hosted APIs).

With a session factory (``PolicyOptions.sessions``, e.g. ``taskforge.agent.environments.dataset_sessions``)
each sample is a multi-turn tool-calling episode in a live sandbox session
(``taskforge.agent.chat_episode``): the model explores and edits the broken workspace through the tools and
the patch is the session's diff. Without one, the one-shot mode of old: the model sees only the problem
statement and answers with a diff.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from taskforge.agent.chat_client import ChatClient, post_chat
from taskforge.agent.chat_episode import run_chat_episode
from taskforge.agent.episode import EndReason, EpisodeBudget, EpisodeRecord
from taskforge.core.errors import ConfigError, TaskforgeError
from taskforge.core.settings import Settings
from taskforge.core.task import Task
from taskforge.rl.answer_patch import extract_patch
from taskforge.rl.grading import GradedGroup
from taskforge.rl.policies.base import PolicyOptions, _Stateless

SYSTEM_PROMPT = ("You are an expert software engineer. A feature was removed from a repository; implement it. "
                 "Answer with a unified diff (git format, paths a/... b/...) against the repository, "
                 "inside one ```diff fenced block.")


class OpenAIPolicy(_Stateless):
    """An OpenAI-compatible chat-completions endpoint (``POST {endpoint}/chat/completions``).

    Agentic mode (a session factory given): one episode per sample; ``drain_episodes`` hands the loop their
    ``EpisodeRecord``s. One-shot mode: asks for ``n`` choices per request (servers that ignore ``n`` are
    asked again until ``n`` answers came back) and extracts the patch from each answer. An unreachable
    endpoint or a 4xx answer is a run-level ``ConfigError``; a timeout or 5xx gives empty patches (one-shot)
    or ends the episode with ``EndReason.ERROR``, counted in ``failures``.
    """

    name = "openai"

    def __init__(self, options: PolicyOptions) -> None:
        self.client = ChatClient.at(options.endpoint, options.model,
                                    api_key=os.environ.get(options.api_key_env, ""),
                                    temperature=options.temperature, max_tokens=options.max_tokens,
                                    timeout_s=options.timeout_s)
        self.url, self.model = self.client.url, self.client.model
        self.sessions = options.sessions
        self.budget: EpisodeBudget = options.budget or EpisodeBudget.from_settings(Settings.load())
        self.failures = 0
        self.episodes: list[EpisodeRecord] = []

    def messages(self, task: Task) -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Repository: {task.repo} ({task.version})\n\n{task.problem_statement}"}]

    def propose(self, task: Task, n: int) -> list[str]:
        if self.sessions is not None:
            return [self._episode(task, j) for j in range(n)]
        answers: list[str] = []
        for _ in range(n):  # at most n requests (a server that ignores `n` answers one choice each)
            got = self._request(task, n - len(answers))
            if got is None:
                self.failures += 1
                break
            answers.extend(got)
            if len(answers) >= n:
                break
        patches = [extract_patch(a) for a in answers[:n]]
        return patches + [""] * (n - len(patches))

    def _episode(self, task: Task, sample: int) -> str:
        assert self.sessions is not None
        try:
            with self.sessions(task) as session:
                patch, record = run_chat_episode(session, self.client, self.budget, sample=sample)
        except ConfigError:
            raise  # a wrong endpoint or model: the run's failure, not the episode's
        except TaskforgeError as exc:  # the session could not open (environment, sandbox): this episode fails
            patch, record = "", EpisodeRecord(task.instance_id, sample, EndReason.ERROR, detail=str(exc)[:500])
        if record.end_reason is EndReason.ERROR:
            self.failures += 1
        self.episodes.append(record)
        return patch

    def drain_episodes(self) -> list[EpisodeRecord]:
        """The records of the episodes run since the last call (the loop puts them in the training log)."""
        out, self.episodes = self.episodes, []
        return out

    def _request(self, task: Task, n: int) -> list[str] | None:
        body = {"model": self.model, "messages": self.messages(task), "n": n,
                "temperature": self.client.temperature, "max_tokens": self.client.max_tokens}
        payload = post_chat(self.url, self.client.api_key, body, self.client.timeout_s)
        if payload is None:
            return None
        choices = payload.get("choices") or []
        return [str((c.get("message") or {}).get("content") or "") for c in choices] or None

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        return {"endpoint_failures": float(self.failures)}


def make_openai(options: PolicyOptions) -> OpenAIPolicy:
    return OpenAIPolicy(options)
