"""What a session's tools act on: a shell and the workspace's files, on one backend (local jail or container).

``SessionBackend`` is the small surface the tools need (``taskforge.agent.tools``); ``session_local`` and
``session_docker`` implement it. Both run every command through ``SHELL_WRAPPER`` inside the sandbox, so
time limit, output truncation and exit code behave the same on either backend:

- the command runs under ``timeout`` (TERM, then KILL 2 s later) with stdin from ``/dev/null``;
- stdout and stderr go to one file in the sandbox's ``/tmp``; past ``max_chars`` bytes only the head and the
  tail are printed, with ``TRUNCATION_MARKER`` and the number of bytes left out in between;
- with the fourth argument ``1`` (docker) every other process of the sandbox user is killed afterwards
  (``kill -9 -1``: the container's init is spared), so nothing a call started outlives it. The local jail
  needs no such step: its PID namespace dies with the call.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from taskforge.core.files import BYTECODE_SUFFIXES, SKIP_DIRS

TRUNCATION_MARKER = "[taskforge: output truncated"
_TRUNCATED = re.compile(re.escape(TRUNCATION_MARKER) + r", \d+ of \d+ bytes omitted\]")
TIMEOUT_EXIT_CODES = (124, 137)  # timeout's own code after TERM, and 128 + KILL

SHELL_WRAPPER = r"""
out=$(mktemp) || exit 125
timeout -k 2 "$1" bash -c "$2" </dev/null >"$out" 2>&1
rc=$?
size=$(stat -c %s "$out")
if [ "$size" -gt "$3" ]; then
  half=$(( $3 / 2 ))
  head -c "$half" "$out"
  printf '\n[taskforge: output truncated, %d of %d bytes omitted]\n' $(( size - 2 * half )) "$size"
  tail -c "$half" "$out"
else
  cat "$out"
fi
rm -f "$out"
if [ "$4" = 1 ]; then kill -9 -1 2>/dev/null; fi
exit $rc
"""


@dataclass(frozen=True, slots=True)
class ShellResult:
    """One command's outcome: ``exit_code`` None when it ran past its time limit and was killed."""

    exit_code: int | None
    output: str
    truncated: bool = False
    elapsed_s: float = 0.0


def shell_result(rc: int | None, output: str, elapsed_s: float, timeout_s: float) -> ShellResult:
    """A ``ShellResult`` from what ``SHELL_WRAPPER`` returned (a timeout's exit codes mean: killed)."""
    timed_out = rc is None or (rc in TIMEOUT_EXIT_CODES and elapsed_s >= timeout_s)
    return ShellResult(None if timed_out else rc, output, bool(_TRUNCATED.search(output)), elapsed_s)


class SessionBackend(Protocol):
    """A live sandbox holding one workspace. Paths are workspace-relative POSIX paths, already checked."""

    root: str  # the workspace's path as commands inside the sandbox see it

    @property
    def host_workspace(self) -> Path | None:
        """The workspace on this host (local), or None (docker)."""
        ...

    def shell(self, command: str, timeout_s: float, max_chars: int) -> ShellResult: ...

    def read_bytes(self, rel: str) -> bytes | None:
        """The file's bytes; None when it is not a regular file inside the workspace."""
        ...

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write the file (parents created); ``ValueError`` when the path leads outside the workspace."""
        ...

    def files(self) -> dict[str, bytes]:
        """Every regular file of the workspace (``SKIP_DIRS`` and byte code left out), by relative path."""
        ...

    def close(self) -> None: ...


def tree_files(root: Path) -> dict[str, bytes]:
    """The regular files under ``root`` (symlinks, ``SKIP_DIRS`` and byte code left out)."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if name.endswith(BYTECODE_SUFFIXES) or os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as fh:
                out[Path(path).relative_to(root).as_posix()] = fh.read()
    return out


def keep_path(rel: str) -> bool:
    """Whether a file of a workspace archive belongs to the workspace's text (as ``tree_files`` keeps)."""
    parts = rel.split("/")
    return not (SKIP_DIRS & set(parts[:-1])) and not rel.endswith(BYTECODE_SUFFIXES)
