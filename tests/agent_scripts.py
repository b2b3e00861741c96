"""Scripts for the scripted OpenAI-compatible endpoint (``taskforge.agent.fake_endpoint``): a solver built
from a task's gold patch, the null agent, an agent that calls a missing tool."""

from __future__ import annotations

from typing import Any

import unidiff

from taskforge.core.task import Task


def gold_edits(task: Task) -> list[tuple[str, dict[str, Any]]]:
    """The gold patch as tool calls: one ``str_replace`` per hunk (``create_file`` for a new file)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for section in unidiff.PatchSet(task.patch):
        if section.is_added_file:
            text = "".join(ln.value for h in section for ln in h if ln.is_added)
            calls.append(("create_file", {"path": section.path, "content": text}))
            continue
        for hunk in section:
            old = "".join(ln.value for ln in hunk if not ln.is_added)
            new = "".join(ln.value for ln in hunk if not ln.is_removed)
            calls.append(("str_replace", {"path": section.path, "old_str": old, "new_str": new}))
    return calls


def solver_script(task: Task) -> list[list[tuple[str, Any]]]:
    """Look around (and, on purpose, at a cache and the git history: the trajectory monitor must see it), edit
    with the gold content, run the visible tests, submit."""
    first = unidiff.PatchSet(task.patch)[0]
    hunk = first[0]
    view = {"path": first.path, "start_line": hunk.source_start, "end_line": hunk.source_start + hunk.source_length}
    return [[("bash", {"command": "ls; ls ~/.cache/pip 2>&1; git log -1 2>&1 | head -1"})],
            [("view_file", view)],
            [(name, args) for name, args in gold_edits(task)],
            [("run_tests", {})],
            [("submit", {})]]


NULL_SCRIPT: list[list[tuple[str, Any]]] = [[("submit", {})]]
MISSING_TOOL_SCRIPT: list[list[tuple[str, Any]]] = [[("search_repo", {"query": "pluralize"})],
                                                    [("bash", "{not json")], [("submit", {})]]
