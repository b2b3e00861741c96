"""Detectors of tool-call mistakes in an agentic turn, each giving a one-line hint for that turn's teacher.

The patch-level detectors (syntax error, undefined name, wrong signature) are in
``taskforge.rl.feedback``, with the ``Hint`` value and the KL; this module adds the turn-level ones the
reference method targets (a hint inserted at the turn where the model erred; the hinted model is the
teacher, the KL is on that turn's tokens only: ``taskforge.agent.trajectory``). ``diagnose_turn`` looks
at one (call, observation) pair, first match wins:

* ``unknown_tool``: the call names a tool that does not exist -> "Reminder: available tools are ...".
* ``malformed_arguments``: bad JSON, no tool call at all, or arguments that do not fit the schema.
* ``edit_not_applied``: ``str_replace`` whose ``old_str`` is absent or not unique.
* ``command_not_found`` / ``wrong_path``: a ``bash`` command failed for a reason the model could know
  (``python`` is ``python3`` here; a file or directory that does not exist).
* ``style``: an edit to a Python file that breaks a rule of the repository (tab indentation, or a line
  longer than the ``max-line-length`` its flake8/ruff/pycodestyle config sets).

Detectors read only what the episode already has (the call, the observation, optionally the workspace
for the style config); none of them looks at the answer.
"""

from __future__ import annotations

import configparser
import json
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path

from taskforge.agent.protocol import Observation, ToolCall, ToolError
from taskforge.rl.feedback import Hint

TOOL_HINT_KINDS = ("unknown_tool", "malformed_arguments", "edit_not_applied", "command_not_found", "wrong_path",
                   "style")

_NOT_FOUND = re.compile(r"(?:bash: (?:line \d+: )?)?([\w.+-]+): (?:command )?not found")
_NO_FILE = re.compile(r"(?:can't open file '([^']+)'|([\w./-]+): No such file or directory|"
                      r"cannot access '([^']+)': No such file or directory)")
_ALTERNATIVES = {"python": "python3", "pip": "python3 -m pip", "pytest": "python3 -m pytest"}


def diagnose_turn(call: ToolCall, obs: Observation, tool_names: Sequence[str],
                  workspace: Path | None = None) -> Hint | None:
    """A hint for the mistake in this turn, or ``None`` (module doc)."""
    if obs.error is ToolError.UNKNOWN_TOOL:
        return Hint("unknown_tool", f"Reminder: available tools are {', '.join(tool_names)}; `{call.name}` is not "
                                    "one of them (run shell commands through bash).")
    if obs.error in (ToolError.BAD_JSON, ToolError.BAD_ARGUMENTS):
        name = call.name if call.name in tool_names else "a tool"
        return Hint("malformed_arguments", f"Reminder: call {name} with one JSON object of its arguments, "
                                           'e.g. {"name": "bash", "arguments": {"command": "ls"}}.')
    if obs.error is ToolError.EDIT_NOT_APPLIED:
        return Hint("edit_not_applied", "Reminder: str_replace needs old_str copied exactly from the file and "
                                        "unique in it; view_file first.")
    if call.name == "bash" and obs.exit_code != 0 and obs.error is None:
        hint = _command_hint(obs.output)
        if hint is not None:
            return hint
    if call.name in ("create_file", "str_replace") and obs.error is None:
        return _style_hint(call, workspace)
    return None


def _command_hint(output: str) -> Hint | None:
    m = _NOT_FOUND.search(output)
    if m:
        cmd = m.group(1)
        alt = _ALTERNATIVES.get(cmd)
        tail = f"use `{alt}`" if alt else "use a command that exists here (check with `command -v`)"
        return Hint("command_not_found", f"Reminder: `{cmd}` is not installed in this environment; {tail}.")
    m = _NO_FILE.search(output)
    if m:
        path = next(g for g in m.groups() if g)
        return Hint("wrong_path", f"Reminder: `{path}` does not exist; paths are relative to the repository "
                                  "root, list them with `ls` or `find . -name '*.py'`.")
    return None


def _style_hint(call: ToolCall, workspace: Path | None) -> Hint | None:
    try:
        args = json.loads(call.arguments)
    except ValueError:
        return None
    path = str(args.get("path", "")) if isinstance(args, dict) else ""
    text = str(args.get("content" if call.name == "create_file" else "new_str", "")) if isinstance(args, dict) else ""
    if not path.endswith(".py") or not text:
        return None
    if re.search(r"(?m)^\t", text):
        return Hint("style", "Reminder: this repository indents Python with spaces, not tabs.")
    limit = max_line_length(workspace) if workspace is not None else None
    if limit is not None:
        longest = max((len(line) for line in text.splitlines()), default=0)
        if longest > limit:
            return Hint("style", f"Reminder: this repository limits lines to {limit} characters "
                                 f"(a line here has {longest}).")
    return None


def max_line_length(workspace: Path) -> int | None:
    """The line-length limit the repository's flake8 / pycodestyle / ruff / black config sets, if any."""
    for name in ("setup.cfg", "tox.ini", ".flake8"):
        f = workspace / name
        if f.is_file():
            cp = configparser.ConfigParser()
            try:
                cp.read_string(f.read_text(errors="replace"))
            except configparser.Error:
                continue
            for section in ("flake8", "pycodestyle", "pep8"):
                value = cp.get(section, "max-line-length", fallback=None) or cp.get(section, "max_line_length",
                                                                                     fallback=None)
                if value and value.strip().isdigit():
                    return int(value.strip())
    f = workspace / "pyproject.toml"
    if f.is_file():
        try:
            tool = tomllib.loads(f.read_text(errors="replace")).get("tool", {})
        except tomllib.TOMLDecodeError:
            return None
        for section in ("ruff", "black"):
            value = tool.get(section, {}).get("line-length")
            if isinstance(value, int):
                return value
    return None
