"""``openai``: an OpenAI-compatible chat-completions endpoint (vLLM, SGLang, hosted APIs)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence

from taskforge.core.errors import ConfigError
from taskforge.core.task import Task
from taskforge.rl.answer_patch import extract_patch
from taskforge.rl.grading import GradedGroup
from taskforge.rl.policies.base import PolicyOptions, _Stateless

SYSTEM_PROMPT = ("You are an expert software engineer. A feature was removed from a repository; implement it. "
                 "Answer with a unified diff (git format, paths a/... b/...) against the repository, "
                 "inside one ```diff fenced block.")


class OpenAIPolicy(_Stateless):
    """An OpenAI-compatible chat-completions endpoint (``POST {endpoint}/chat/completions``).

    Asks for ``n`` choices per request (servers that ignore ``n`` are asked again until ``n`` answers
    came back) and extracts the patch from each answer. An unreachable endpoint or a 4xx answer is a
    run-level ``ConfigError``; a timeout or 5xx gives empty patches, counted in ``failures``.
    """

    name = "openai"

    def __init__(self, options: PolicyOptions) -> None:
        if not options.endpoint or not options.model:
            raise ConfigError("policy 'openai' needs --endpoint URL and --model NAME "
                              f"(got endpoint={options.endpoint!r}, model={options.model!r})")
        self.url = options.endpoint.rstrip("/") + "/chat/completions"
        self.model = options.model
        self.api_key = os.environ.get(options.api_key_env, "")
        self.temperature = options.temperature
        self.max_tokens = options.max_tokens
        self.timeout_s = options.timeout_s
        self.failures = 0

    def messages(self, task: Task) -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Repository: {task.repo} ({task.version})\n\n{task.problem_statement}"}]

    def propose(self, task: Task, n: int) -> list[str]:
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

    def _request(self, task: Task, n: int) -> list[str] | None:
        body = json.dumps({"model": self.model, "messages": self.messages(task), "n": n,
                           "temperature": self.temperature, "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                payload = json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise ConfigError(f"endpoint {self.url} answered HTTP {exc.code} ({exc.reason}); "
                                  "check --model and the API key variable") from exc
            return None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                return None
            raise ConfigError(f"cannot reach {self.url} ({exc.reason}); check --endpoint") from exc
        except (TimeoutError, json.JSONDecodeError):
            return None
        choices = payload.get("choices") or []
        return [str((c.get("message") or {}).get("content") or "") for c in choices] or None

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        return {"endpoint_failures": float(self.failures)}


def make_openai(options: PolicyOptions) -> OpenAIPolicy:
    return OpenAIPolicy(options)
