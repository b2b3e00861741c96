"""``FakeSession``: an in-memory-fast ``Session`` over a temp copy of a workspace, for tests and benches.

Not a sandbox: ``bash`` runs ``bash -c`` as the current user in the copy's directory (argv list, its own
process group killed on timeout, a scrubbed environment, no network isolation), so use it only with
scripted or tiny models on trusted workspaces. The live, locked-down sessions are
``taskforge.agent.session.open_session``; this fake conforms to the same ``Session`` protocol and tool
names so tests of trajectories, feedback and adapters run in milliseconds.

Tools: the names and argument schemas come from ``taskforge.agent.tools.TOOLS`` when that module exists;
otherwise from the minimal ``FALLBACK_TOOLS`` below (same names and required arguments), so this module
works on either side of the merge. ``run_tests`` runs ``python -m pytest -q`` in the copy.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from taskforge.agent.protocol import Observation, ToolCall, ToolError
from taskforge.core.task import Task

# name -> required argument names (types are all strings except run_tests' optional list)
FALLBACK_TOOLS: Mapping[str, tuple[str, ...]] = {
    "bash": ("command",), "view_file": ("path",), "str_replace": ("path", "old_str", "new_str"),
    "create_file": ("path", "content"), "run_tests": (), "submit": (),
}


def tool_required_args() -> dict[str, tuple[str, ...]]:
    """{tool name: required argument names}, from ``taskforge.agent.tools`` when present."""
    try:
        from taskforge.agent.tools import TOOLS  # type: ignore[attr-defined]
    except ImportError:
        return dict(FALLBACK_TOOLS)
    return {name: tuple(t.parameters.get("required", ())) for name, t in TOOLS.items()}


TOOL_NAMES: tuple[str, ...] = tuple(tool_required_args())
MAX_OUTPUT_CHARS = 4000


def _truncate(text: str, limit: int = MAX_OUTPUT_CHARS) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters truncated ...]\n{text[-half:]}", True


class FakeSession:
    """A ``Session`` over a private copy of ``workspace`` (module doc); ``close`` removes the copy."""

    def __init__(self, task: Task, workspace: str | Path, timeout_s: float = 10.0) -> None:
        self.task = task
        self.timeout_s = timeout_s
        self._dir = Path(tempfile.mkdtemp(prefix="taskforge-fake-session-"))
        self._root = self._dir / "workspace"
        shutil.copytree(workspace, self._root, symlinks=True,
                        ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
        self._pristine = _tree(self._root)
        self._closed = False
        self.calls = 0

    @property
    def workspace(self) -> Path | None:
        return self._root

    # --- tools -------------------------------------------------------------------------------------
    def execute(self, call: ToolCall) -> Observation:
        t0 = time.perf_counter()
        obs = self._execute(call)
        self.calls += 1
        text, cut = _truncate(obs.output)
        return Observation(text, obs.exit_code, cut or obs.truncated, obs.error, time.perf_counter() - t0,
                           obs.submitted)

    def _execute(self, call: ToolCall) -> Observation:
        if self._closed:
            return Observation("the session is closed", -1, error=ToolError.SESSION_CLOSED)
        tools = tool_required_args()
        if call.name not in tools:
            return Observation(f"unknown tool {call.name!r}; available tools are: {', '.join(tools)}", -1,
                               error=ToolError.UNKNOWN_TOOL)
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError as exc:
            return Observation(f"the arguments of {call.name} are not valid JSON ({exc}); send one JSON object",
                               -1, error=ToolError.BAD_JSON)
        if not isinstance(args, dict):
            return Observation(f"the arguments of {call.name} must be a JSON object", -1, error=ToolError.BAD_JSON)
        missing = [k for k in tools[call.name] if not isinstance(args.get(k), str)]
        if missing:
            return Observation(f"wrong arguments for {call.name}: missing or not a string: {', '.join(missing)}",
                               -1, error=ToolError.BAD_ARGUMENTS)
        return getattr(self, f"_tool_{call.name}")(args)

    def _path(self, raw: str) -> Path | None:
        p = (self._root / raw.strip()).resolve()
        return p if p.is_relative_to(self._root.resolve()) and p != self._root.resolve() else None

    def _tool_bash(self, args: Mapping[str, Any]) -> Observation:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self._dir), "LANG": "C.UTF-8"}
        proc = subprocess.Popen(["bash", "-c", args["command"]], cwd=self._root, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return Observation(out.decode(errors="replace") + f"\n[killed after {self.timeout_s:g}s]", -1,
                               error=ToolError.TIMEOUT)
        return Observation(out.decode(errors="replace"), proc.returncode)

    def _tool_view_file(self, args: Mapping[str, Any]) -> Observation:
        p = self._path(args["path"])
        if p is None or not p.is_file():
            return Observation(f"{args['path']} is not a file in the repository", -1, error=ToolError.BAD_ARGUMENTS)
        lines = p.read_text(errors="replace").splitlines()
        return Observation("".join(f"{i:6}\t{line}\n" for i, line in enumerate(lines, 1)))

    def _tool_str_replace(self, args: Mapping[str, Any]) -> Observation:
        p = self._path(args["path"])
        if p is None or not p.is_file():
            return Observation(f"{args['path']} is not a file in the repository", -1, error=ToolError.BAD_ARGUMENTS)
        text = p.read_text(errors="replace")
        count = text.count(args["old_str"]) if args["old_str"] else 0
        if count != 1:
            why = "does not occur" if count == 0 else f"occurs {count} times"
            return Observation(f"old_str {why} in {args['path']}; view the file and copy the exact text "
                               "(one unique occurrence)", -1, error=ToolError.EDIT_NOT_APPLIED)
        p.write_text(text.replace(args["old_str"], args["new_str"], 1))
        return Observation(f"edited {args['path']}")

    def _tool_create_file(self, args: Mapping[str, Any]) -> Observation:
        p = self._path(args["path"])
        if p is None:
            return Observation(f"{args['path']} is not inside the repository", -1, error=ToolError.BAD_ARGUMENTS)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(args["content"])
        return Observation(f"created {args['path']}")

    def _tool_run_tests(self, args: Mapping[str, Any]) -> Observation:
        return self._tool_bash({"command": "python -m pytest -q -x 2>&1 | tail -20"})

    def _tool_submit(self, args: Mapping[str, Any]) -> Observation:
        return Observation("submitted: your changes will be graded", submitted=True)

    # --- result ------------------------------------------------------------------------------------
    def diff(self) -> str:
        after = _tree(self._root) if not self._closed else self._pristine
        out = []
        for path in sorted(set(self._pristine) | set(after)):
            a, b = self._pristine.get(path), after.get(path)
            if a == b:
                continue
            for line in difflib.unified_diff((a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
                                             "/dev/null" if a is None else f"a/{path}",
                                             "/dev/null" if b is None else f"b/{path}"):
                out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        return "".join(out)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> FakeSession:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
            out[p.relative_to(root).as_posix()] = p.read_text(errors="replace")
    return out
