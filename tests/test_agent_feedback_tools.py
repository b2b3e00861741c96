"""Turn-level feedback detectors against real observations of the fake session, and tool-call parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taskforge.agent.fake_session import TOOL_NAMES, FakeSession
from taskforge.agent.feedback_tools import diagnose_turn, max_line_length
from taskforge.agent.protocol import ToolCall, ToolError
from taskforge.core.task import Task


@pytest.fixture
def session(tmp_path: Path) -> FakeSession:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "setup.cfg").write_text("[flake8]\nmax-line-length = 40\n")
    task = Task.__new__(Task)  # the session reads nothing of the task beyond holding it
    with FakeSession(task, ws, timeout_s=5) as s:
        yield s


def call(name: str, **args: object) -> ToolCall:
    return ToolCall(name, json.dumps(args))


def hint_of(session: FakeSession, c: ToolCall) -> str | None:
    h = diagnose_turn(c, session.execute(c), TOOL_NAMES, session.workspace)
    return None if h is None else h.kind


def test_each_mistake_gets_its_hint(session: FakeSession) -> None:
    assert hint_of(session, call("python", code="1")) == "unknown_tool"
    assert hint_of(session, ToolCall("bash", "{not json")) == "malformed_arguments"
    assert hint_of(session, call("view_file")) == "malformed_arguments"
    assert hint_of(session, call("str_replace", path="pkg/calc.py", old_str="a * b", new_str="a + b")) == "edit_not_applied"
    assert hint_of(session, call("bash", command="definitely-not-a-command-xyz --version")) == "command_not_found"
    assert hint_of(session, call("bash", command="cat pkg/nope.py")) == "wrong_path"
    assert hint_of(session, call("create_file", path="pkg/t.py", content="def f():\n\treturn 1\n")) == "style"
    assert hint_of(session, call("create_file", path="pkg/u.py", content="x = '" + "y" * 60 + "'\n")) == "style"


def test_correct_calls_get_no_hint_and_the_edit_lands_in_the_diff(session: FakeSession) -> None:
    assert hint_of(session, call("bash", command="ls pkg")) is None
    assert hint_of(session, call("view_file", path="pkg/calc.py")) is None
    assert hint_of(session, call("str_replace", path="pkg/calc.py", old_str="a - b", new_str="a + b")) is None
    diff = session.diff()
    assert "-    return a - b" in diff and "+    return a + b" in diff
    assert session.execute(call("submit")).submitted


def test_unknown_tool_hint_names_the_real_tools(session: FakeSession) -> None:
    obs = session.execute(call("python"))
    assert obs.error is ToolError.UNKNOWN_TOOL
    hint = diagnose_turn(call("python"), obs, TOOL_NAMES)
    assert hint is not None and all(name in hint.text for name in TOOL_NAMES)


def test_python_not_found_suggests_python3() -> None:
    from taskforge.agent.protocol import Observation

    obs = Observation("bash: line 1: python: command not found\n", 127)
    hint = diagnose_turn(call("bash", command="python x.py"), obs, TOOL_NAMES)
    assert hint is not None and "python3" in hint.text


def test_bash_timeout_is_a_structured_error(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    with FakeSession(Task.__new__(Task), tmp_path / "w", timeout_s=0.5) as s:
        obs = s.execute(call("bash", command="sleep 30"))
    assert obs.error is ToolError.TIMEOUT and obs.elapsed_s < 5


def test_line_length_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 99\n")
    assert max_line_length(tmp_path) == 99
    assert max_line_length(tmp_path / "missing") is None


def test_parse_tool_call() -> None:
    pytest.importorskip("transformers")
    from taskforge.agent.hf_episode import parse_tool_call
    from taskforge.agent.protocol import Observation

    ok = parse_tool_call('<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>')
    assert ok == ToolCall("bash", '{"command": "ls"}')
    broken = parse_tool_call('<tool_call>{"name": "bash", "arguments": {"command": </tool_call>')
    assert isinstance(broken, ToolCall) and broken.name == "bash"  # the session answers BAD_JSON
    none = parse_tool_call("I will now look at the code")
    assert isinstance(none, Observation) and none.error is ToolError.BAD_JSON
