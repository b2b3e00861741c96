"""A scripted OpenAI-compatible chat endpoint on localhost: the fake of the ``openai`` policy's seam.

    with ScriptedEndpoint([[("bash", {"command": "ls"})], [("submit", {})]]) as url:
        policy = make_policy("openai", PolicyOptions(endpoint=url, model="scripted", sessions=...))

Each request gets the next turn of the script: a list of tool calls ``(name, arguments)`` (arguments a dict,
sent as JSON, or a raw string, sent as is: malformed JSON on purpose). Past the end of the script every
answer is a plain message without tool calls. With ``per_episode=True`` the script restarts whenever a
request holds only the system and user messages (a new episode). ``requests`` keeps every request body, so a
test can read what the model was shown (the observations). Standard library only (``http.server`` in a
thread); usage is reported as 10 completion tokens per turn.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

Turn = Sequence[tuple[str, Mapping[str, Any] | str]]


class ScriptedEndpoint:
    def __init__(self, script: Sequence[Turn], *, per_episode: bool = True, completion_tokens: int = 10) -> None:
        self.script = list(script)
        self.per_episode = per_episode
        self.completion_tokens = completion_tokens
        self.requests: list[dict[str, Any]] = []
        self._next = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def answer(self, body: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(dict(body))
            if self.per_episode and len(body.get("messages", ())) <= 2:
                self._next = 0
            turn = self.script[self._next] if self._next < len(self.script) else None
            index = self._next
            self._next += 1
        if turn is None:
            message: dict[str, Any] = {"role": "assistant", "content": "I have nothing more to do."}
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{index}_{k}", "type": "function",
                 "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for k, (name, args) in enumerate(turn)]}
        return {"id": f"scripted-{index}", "object": "chat.completion", "model": body.get("model", ""),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if turn else "stop"}],
                "usage": {"prompt_tokens": sum(len(json.dumps(m)) for m in body.get("messages", ())) // 4,
                          "completion_tokens": self.completion_tokens}}

    def tool_messages(self) -> list[dict[str, Any]]:
        """The tool messages of the latest episode, as its last request carried them (oldest first)."""
        last = self.requests[-1] if self.requests else {}
        return [m for m in last.get("messages", ()) if m.get("role") == "tool"]

    def __enter__(self) -> str:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                payload = json.dumps(endpoint.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
