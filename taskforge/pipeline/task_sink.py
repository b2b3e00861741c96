"""``TaskSink``: a source's accepted tasks reach the dataset as they are decided, not when it finishes.

A task is *decided* once every candidate ranked before it has a verdict (so the dataset of a run that
ends normally is exactly the deterministic one of ``select_tasks``). Decided tasks are added to the
writer at once and flushed as a shard at most every ``flush_every_s`` seconds (a shard per task would
make thousands of tiny files); on a stop (SIGTERM, Ctrl-C, time cap) every accepted task so far is added,
decided or not, and flushed, and ``generate`` then writes the manifest. After a SIGKILL the whole shards
already flushed are adopted by the next writer, and the journal holds the rest
(``taskforge dataset recover OUT``, or the same ``generate`` again).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

FLUSH_EVERY_S = 30.0


class TaskSink:
    """Adds the accepted tasks of one source to ``writer`` (its repository archive first, once)."""

    def __init__(self, writer: Any, repo: str, commit: str, repo_dir: Path,
                 flush_every_s: float = FLUSH_EVERY_S) -> None:
        self.writer = writer
        self.repo, self.commit, self.repo_dir = repo, commit, Path(repo_dir)
        self.flush_every_s = flush_every_s
        self.written: list[Any] = []  # CandidateResults whose task went to the writer, in order
        self._ids: set[str] = set()
        self._archived = False
        self._last_flush = time.monotonic()

    def add(self, results: Iterable[Any]) -> int:
        """Add the tasks of ``results`` not added yet; returns how many were new."""
        new = 0
        for res in results:
            if res.task is None or res.candidate_id in self._ids:
                continue
            if not self._archived:
                self.writer.add_repo_archive(self.repo, self.commit, self.repo_dir)
                self._archived = True
            self.writer.add(res.task)
            self._ids.add(res.candidate_id)
            self.written.append(res)
            new += 1
        if new and time.monotonic() - self._last_flush >= self.flush_every_s:
            self.flush()
        return new

    def flush(self) -> None:
        self.writer.flush()
        self._last_flush = time.monotonic()

    def finish(self) -> None:
        """The source is done: its archive is stored even when it yielded no task; flush."""
        if not self._archived:
            self.writer.add_repo_archive(self.repo, self.commit, self.repo_dir)
            self._archived = True
        self.flush()


def accepted_so_far(order: Sequence[Any], results: dict[str, Any], max_tasks: int | None) -> list[Any]:
    """Accepted results in candidate order, decided or not, at most ``max_tasks`` (what a stop keeps)."""
    out = [results[c.candidate_id] for c in order
           if c.candidate_id in results and results[c.candidate_id].task is not None]
    return out[:max_tasks] if max_tasks is not None else out
