"""Patch text helpers of the RL side: pull a diff out of an agent's answer; make a wrong variant of a patch.

``extract_patch`` turns free text (a chat answer, an agent's stdout) into the unified diff it holds.
``wrong_patch`` makes a *plausible but wrong* solution out of a gold patch for the simulated policy:
the same hunks with every ``return <value>`` among the added lines turned into ``return None`` (line
counts unchanged, so the hunk headers stay valid and the patch applies); when the gold patch returns
nothing that could be changed, the wrong solution is the empty patch, which scores 0 by construction.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```(?:diff|patch|udiff)?[ \t]*\n(.*?)```", re.DOTALL)
_RETURN = re.compile(r"^\+(\s*)return\s+(?!None\s*(?:#.*)?$)(\S.*)$")


def _looks_like_diff(text: str) -> bool:
    return "diff --git" in text or ("\n+++ " in text and ("--- " in text))


def extract_patch(text: str) -> str:
    """The unified diff in ``text`` ('' when there is none); ends with a newline."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    body = next((c for c in candidates if _looks_like_diff(c)), None)
    if body is None:
        start = text.find("diff --git")
        if start < 0:
            m = re.search(r"^--- .*\n\+\+\+ ", text, re.MULTILINE)
            start = m.start() if m else -1
        if start < 0:
            return ""
        body = text[start:]
    body = body.strip("\n")
    return body + "\n" if body else ""


def wrong_patch(gold: str) -> str:
    """A patch shaped like ``gold`` that does not implement the feature (see module doc)."""
    lines = gold.splitlines(keepends=True)
    out, changed = [], False
    for line in lines:
        m = _RETURN.match(line) if not line.startswith("+++") else None
        if m:
            end = "\n" if line.endswith("\n") else ""
            line, changed = f"+{m.group(1)}return None{end}", True
        out.append(line)
    wrong = "".join(out)
    return wrong if changed and wrong != gold else ""
