"""The tools of an agentic episode, declared once as OpenAI function-calling schemas, and their dispatch.

In the mini-swe-agent / SWE-agent tradition: ``bash``, ``view_file``, ``str_replace``, ``create_file``,
``run_tests`` (the task's *visible* tests: the broken workspace's remaining suite, with a pass/fail
summary) and ``submit``. ``TOOLS`` is the registry (name -> ``Tool``); ``schemas()`` is what goes into a
chat request's ``tools``. ``dispatch`` never raises for what the model sent: an unknown tool, bad JSON,
wrong arguments, a path outside the workspace or an edit that does not apply give an ``Observation`` with a
``ToolError`` and a message saying what to do (for ``UNKNOWN_TOOL``: the available tools, the hook for
turn-local feedback).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from taskforge.agent.backend import SessionBackend, ShellResult
from taskforge.agent.episode import EpisodeBudget
from taskforge.agent.protocol import Observation, ToolCall, ToolError
from taskforge.core.task import Task

Runner = Callable[[SessionBackend, Task, Mapping[str, Any], EpisodeBudget], Observation]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema of the arguments (an object)
    run: Runner

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": dict(self.parameters)}}


class _Refused(Exception):
    """A call the tools refuse; carries the ToolError and the message for the model."""

    def __init__(self, error: ToolError, message: str) -> None:
        super().__init__(message)
        self.error = error


def _obj(required: tuple[str, ...], **props: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(props), "required": list(required), "additionalProperties": False}


_PATH = {"type": "string", "description": "File path, relative to the repository root (or absolute inside it)."}


def _path(backend: SessionBackend, raw: str) -> str:
    """``raw`` as a workspace-relative path; ``_Refused`` when it leads outside the workspace."""
    root = backend.root.rstrip("/")
    p = raw.strip()
    if p == root or p.startswith(root + "/"):
        p = p[len(root):].lstrip("/")
    norm = posixpath.normpath(p) if p else "."
    if posixpath.isabs(norm) or norm == ".." or norm.startswith("../") or norm == "." or "\x00" in norm:
        raise _Refused(ToolError.BAD_ARGUMENTS, f"path {raw!r} is not a file inside the repository ({backend.root}); "
                                                "give a path relative to the repository root")
    return norm


def _read_text(backend: SessionBackend, rel: str) -> str:
    data = backend.read_bytes(rel)
    if data is None:
        raise _Refused(ToolError.BAD_ARGUMENTS, f"{rel} is not a file in the repository; list files with bash "
                                                "(e.g. `ls` or `find . -name '*.py'`)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(ToolError.BAD_ARGUMENTS, f"{rel} is not UTF-8 text; inspect it with bash") from None


def _write(backend: SessionBackend, rel: str, text: str) -> None:
    try:
        backend.write_bytes(rel, text.encode("utf-8"))
    except (ValueError, OSError) as exc:
        raise _Refused(ToolError.BAD_ARGUMENTS, f"cannot write {rel}: {exc}") from None


def _shown(r: ShellResult, timeout_s: float) -> Observation:
    if r.exit_code is None:
        return Observation(f"{r.output}\n[taskforge: killed after {timeout_s:.0f}s; run shorter commands]".lstrip(),
                           -1, r.truncated, ToolError.TIMEOUT, r.elapsed_s)
    return Observation(r.output, r.exit_code, r.truncated, None, r.elapsed_s)


def _bash(backend: SessionBackend, task: Task, args: Mapping[str, Any], budget: EpisodeBudget) -> Observation:
    return _shown(backend.shell(args["command"], budget.call_timeout_s, budget.max_output_chars),
                  budget.call_timeout_s)


def _view(backend: SessionBackend, task: Task, args: Mapping[str, Any], budget: EpisodeBudget) -> Observation:
    rel = _path(backend, args["path"])
    lines = _read_text(backend, rel).splitlines()
    start = max(1, int(args.get("start_line", 1)))
    end = min(len(lines), int(args.get("end_line", len(lines))))
    body = "".join(f"{n:6}\t{lines[n - 1]}\n" for n in range(start, end + 1))
    limit = budget.max_output_chars
    if len(body) > limit:
        cut = body[:limit].rsplit("\n", 1)[0]
        shown_to = start + cut.count("\n")
        return Observation(f"{cut}\n[taskforge: output truncated at line {shown_to} of {len(lines)}; "
                           "view the rest with start_line/end_line]", 0, True)
    return Observation(body or f"({rel} is empty)\n", 0)


def _str_replace(backend: SessionBackend, task: Task, args: Mapping[str, Any], budget: EpisodeBudget) -> Observation:
    rel = _path(backend, args["path"])
    text, old, new = _read_text(backend, rel), args["old_str"], args["new_str"]
    if not old:
        raise _Refused(ToolError.EDIT_NOT_APPLIED, "old_str is empty; give the exact text to replace "
                                                   "(or use create_file for a whole file)")
    found = text.count(old)
    if found != 1:
        why = "does not occur" if found == 0 else f"occurs {found} times"
        raise _Refused(ToolError.EDIT_NOT_APPLIED, f"old_str {why} in {rel}; copy it exactly from view_file "
                                                   "(whitespace included)" + (" with more surrounding lines to "
                                                                              "make it unique" if found else ""))
    at = text.index(old)
    _write(backend, rel, text[:at] + new + text[at + len(old):])
    first = text.count("\n", 0, at) + 1
    return Observation(f"edited {rel}: replaced lines {first}-{first + old.count(chr(10))} "
                       f"with {new.count(chr(10)) + 1} line(s)\n", 0)


def _create(backend: SessionBackend, task: Task, args: Mapping[str, Any], budget: EpisodeBudget) -> Observation:
    rel = _path(backend, args["path"])
    existed = backend.read_bytes(rel) is not None
    _write(backend, rel, args["content"])
    return Observation(f"{'overwrote' if existed else 'created'} {rel} ({len(args['content'])} characters)\n", 0)


_SUMMARY = re.compile(r"\b(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)\b")


def pytest_command(task: Task, tests: list[str] | None = None) -> str:
    """The shell command of ``run_tests``: pytest on the visible suite (or the given node ids / paths)."""
    spec = task.env_spec
    targets = tests or list(dict.fromkeys((*spec.test_paths, *getattr(spec, "doctest_paths", ())))) or ["."]
    argv = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", *spec.pytest_args, *targets]
    return shlex.join(argv)


def pytest_summary(output: str) -> str:
    """``passed=N failed=M ...`` from pytest's last summary line ('' when there is none)."""
    for line in reversed(output.splitlines()):
        got = _SUMMARY.findall(line)
        if got:
            return ", ".join(f"{n} {kind}" for n, kind in got)
    return ""


def _run_tests(backend: SessionBackend, task: Task, args: Mapping[str, Any], budget: EpisodeBudget) -> Observation:
    tests = args.get("tests")
    if tests is not None and not (isinstance(tests, list) and all(isinstance(t, str) for t in tests)):
        raise _Refused(ToolError.BAD_ARGUMENTS, "tests must be a list of strings (pytest node ids or paths)")
    for t in tests or ():
        _path(backend, t.split("::", 1)[0])
    r = backend.shell(pytest_command(task, tests), budget.call_timeout_s, budget.max_output_chars)
    obs = _shown(r, budget.call_timeout_s)
    summary = pytest_summary(r.output) or ("no tests ran" if r.exit_code == 5 else "no pytest summary")
    verdict = "PASS" if r.exit_code == 0 else "FAIL"
    return Observation(f"[run_tests: {verdict}: {summary}]\n{obs.output}", obs.exit_code, obs.truncated, obs.error,
                       obs.elapsed_s)


def _submit(backend: SessionBackend, task: Task, args: Mapping[str, Any], budget: EpisodeBudget) -> Observation:
    return Observation("submitted: your changes to the repository will be graded\n", 0, submitted=True)


TOOLS: Mapping[str, Tool] = {t.name: t for t in (
    Tool("bash", "Run a shell command in the repository (no network). Each call starts fresh: no state is kept "
         "between calls except files.", _obj(("command",), command={"type": "string"}), _bash),
    Tool("view_file", "Show a file with line numbers (optionally only start_line..end_line).",
         _obj(("path",), path=_PATH, start_line={"type": "integer"}, end_line={"type": "integer"}), _view),
    Tool("str_replace", "Replace the one occurrence of old_str in a file by new_str (old_str must be unique).",
         _obj(("path", "old_str", "new_str"), path=_PATH, old_str={"type": "string"}, new_str={"type": "string"}),
         _str_replace),
    Tool("create_file", "Create a file (or overwrite it) with the given content.",
         _obj(("path", "content"), path=_PATH, content={"type": "string"}), _create),
    Tool("run_tests", "Run the repository's tests (all, or the given pytest node ids / paths) and summarise.",
         _obj((), tests={"type": "array", "items": {"type": "string"}}), _run_tests),
    Tool("submit", "Finish: your current changes to the repository are submitted for grading.", _obj(()), _submit),
)}

_TYPES = {"string": str, "integer": int, "array": list, "object": dict, "boolean": bool}


def schemas(tools: Mapping[str, Tool] = TOOLS) -> list[dict[str, Any]]:
    """The OpenAI ``tools`` list of a chat request."""
    return [t.schema() for t in tools.values()]


def available(tools: Mapping[str, Tool] = TOOLS) -> str:
    return ", ".join(tools)


def parse_arguments(call: ToolCall, tool: Tool) -> dict[str, Any]:
    """The call's arguments checked against the tool's schema; ``_Refused`` with what is wrong."""
    try:
        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except (ValueError, TypeError) as exc:
        raise _Refused(ToolError.BAD_JSON, f"the arguments of {call.name} are not valid JSON ({exc}); send one "
                                           "JSON object, e.g. " + _example(tool)) from None
    if not isinstance(args, dict):
        raise _Refused(ToolError.BAD_JSON, f"the arguments of {call.name} must be a JSON object, e.g. {_example(tool)}")
    props, required = tool.parameters["properties"], tool.parameters["required"]
    missing = [k for k in required if k not in args]
    unknown = [k for k in args if k not in props]
    wrong = [k for k, v in args.items() if k in props and not _is(v, props[k]["type"])]
    if missing or unknown or wrong:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + \
                ([f"unknown {', '.join(unknown)}"] if unknown else []) + \
                [f"{k} must be {props[k]['type']}" for k in wrong]
        raise _Refused(ToolError.BAD_ARGUMENTS, f"wrong arguments for {call.name}: {'; '.join(parts)}; "
                                                f"expected {_example(tool)}")
    return args


def _is(value: Any, kind: str) -> bool:
    return isinstance(value, _TYPES[kind]) and not (kind == "integer" and isinstance(value, bool))


def _example(tool: Tool) -> str:
    props = tool.parameters["properties"]
    return "{" + ", ".join(f'"{k}": <{v["type"]}>' for k, v in props.items()) + "}"


def dispatch(call: ToolCall, backend: SessionBackend, task: Task, budget: EpisodeBudget,
             tools: Mapping[str, Tool] = TOOLS) -> Observation:
    """Run one tool call; every refusal is an ``Observation`` with an error, never an exception."""
    tool = tools.get(call.name)
    if tool is None:
        return Observation(f"unknown tool {call.name!r}; available tools are: {available(tools)}", -1,
                           error=ToolError.UNKNOWN_TOOL)
    try:
        return tool.run(backend, task, parse_arguments(call, tool), budget)
    except _Refused as refused:
        return Observation(str(refused), -1, error=refused.error)
