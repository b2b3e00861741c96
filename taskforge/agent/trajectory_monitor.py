"""Trajectory monitor: tool calls that go after the answer instead of the feature (issue 17, item 7).

The rules are the patch monitor's table (``taskforge.reward.monitor.RULES``), scanner ``"command"``:
``pip_fetch`` (downloading or installing the project), ``cache_read`` (~/.cache, pip cache, wheels and
sdists), ``bytecode`` (.pyc, __pycache__), ``git_history`` (git objects and history), ``site_packages``
(an installed copy), ``network_attempt`` and ``test_tamper`` (changing tests or their configuration).
This module only turns a tool call into ``Event``s: ``cmd`` for the command of ``bash``, ``read`` for a
path a file tool reads, ``edit`` for a path it changes (``Event.line`` = the turn). A finding's ``path``
is the tool's name and its ``line`` the turn, so it says where in the episode the action was.

The monitor only reports (episode record, training log, report); whether a finding costs reward is the
grader's business, which sees only the final patch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from taskforge.agent.protocol import ToolCall
from taskforge.reward.monitor import Event, Finding, counts, match

SCANNER = "command"
_READS = {"view_file": "path"}
_EDITS = {"str_replace": "path", "create_file": "path"}


def call_events(call: ToolCall, turn: int) -> list[Event]:
    """The monitor's events of one tool call (none for malformed arguments: nothing ran)."""
    try:
        args = json.loads(call.arguments or "{}")
    except (ValueError, TypeError):
        return []
    if not isinstance(args, dict):
        return []
    out: list[Event] = []
    if call.name == "bash" and isinstance(cmd := args.get("command"), str):
        out.append(Event("cmd", cmd, turn, cmd))
    if call.name in _READS and isinstance(path := args.get(_READS[call.name]), str):
        out.append(Event("read", path, turn, f"view_file {path}"))
    if call.name in _EDITS and isinstance(path := args.get(_EDITS[call.name]), str):
        out.append(Event("edit", path, turn, f"{call.name} {path}"))
    if call.name == "run_tests" and isinstance(tests := args.get("tests"), list):
        out.extend(Event("read", str(t), turn, f"run_tests {t}") for t in tests)
    return out


def scan_call(call: ToolCall, turn: int) -> list[Finding]:
    """The command rules' findings on one tool call made at ``turn``."""
    return match(call_events(call, turn), call.name, SCANNER)


def scan_calls(calls: Iterable[tuple[int, ToolCall]]) -> tuple[Finding, ...]:
    """Findings of a whole trajectory, given as (turn, call) pairs, in turn order."""
    return tuple(f for turn, call in calls for f in scan_call(call, turn))


__all__ = ["SCANNER", "call_events", "counts", "scan_call", "scan_calls"]
