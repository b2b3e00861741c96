"""A minimal OpenAI-compatible chat-completions client (vLLM, SGLang, hosted APIs), standard library only.

``post_chat`` sends one request: an unreachable endpoint or a 4xx answer is a run-level ``ConfigError``
(the configuration is wrong); a timeout, a 5xx or an unreadable answer is ``None`` (the caller counts a
failure). ``ChatClient.complete`` asks for one assistant turn with ``tools`` and returns a ``ChatReply``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskforge.agent.protocol import ToolCall
from taskforge.core.errors import ConfigError


def post_chat(url: str, api_key: str, body: Mapping[str, Any], timeout_s: float) -> dict[str, Any] | None:
    """POST ``body`` to ``url``; the JSON answer, or None for a timeout / 5xx / unreadable answer."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=max(1.0, timeout_s)) as resp:
            payload = json.loads(resp.read().decode())
    except urllib.error.HTTPError as exc:
        if exc.code < 500:
            raise ConfigError(f"endpoint {url} answered HTTP {exc.code} ({exc.reason}); "
                              "check --model and the API key variable") from exc
        return None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            return None
        raise ConfigError(f"cannot reach {url} ({exc.reason}); check --endpoint") from exc
    except (TimeoutError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return payload if isinstance(payload, dict) else None


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One assistant turn: its text, the tool calls it made, token usage (estimated when not reported)."""

    content: str
    tool_calls: tuple[ToolCall, ...]
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = ""

    def message(self) -> dict[str, Any]:
        """The turn as a chat message to send back in the next request."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            msg["tool_calls"] = [{"id": c.call_id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in self.tool_calls]
        return msg


@dataclass(frozen=True, slots=True)
class ChatClient:
    url: str  # .../chat/completions
    model: str
    api_key: str = ""
    temperature: float = 1.0
    max_tokens: int = 4096  # per turn
    timeout_s: float = 600.0

    @classmethod
    def at(cls, endpoint: str, model: str, **options: Any) -> ChatClient:
        if not endpoint or not model:
            raise ConfigError("an OpenAI-compatible endpoint needs --endpoint URL and --model NAME "
                              f"(got endpoint={endpoint!r}, model={model!r})")
        return cls(endpoint.rstrip("/") + "/chat/completions", model, **options)

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *,
                 max_tokens: int | None = None, timeout_s: float | None = None, turn: int = 0) -> ChatReply | None:
        body = {"model": self.model, "messages": list(messages), "tools": list(tools), "tool_choice": "auto",
                "temperature": self.temperature, "max_tokens": min(self.max_tokens, max_tokens or self.max_tokens)}
        payload = post_chat(self.url, self.api_key, body, min(self.timeout_s, timeout_s or self.timeout_s))
        choices = (payload or {}).get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return None
        msg = choices[0].get("message") or {}
        calls = []
        for k, raw in enumerate(msg.get("tool_calls") or []):
            fn = (raw or {}).get("function") or {}
            args = fn.get("arguments", "{}")
            calls.append(ToolCall(str(fn.get("name", "")), args if isinstance(args, str) else json.dumps(args),
                                  str(raw.get("id") or f"call_{turn}_{k}")))
        content = str(msg.get("content") or "")
        usage = (payload or {}).get("usage") or {}
        sent = sum(len(json.dumps(m)) for m in messages)
        made = len(content) + sum(len(c.arguments) + len(c.name) for c in calls)
        return ChatReply(content, tuple(calls), int(usage.get("prompt_tokens") or sent // 4),
                         int(usage.get("completion_tokens") or max(1, made // 4)),
                         str(choices[0].get("finish_reason") or ""))
