"""``TaskSink`` and the stop helpers: decided tasks reach the writer at once, archive first, flushed on a timer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from taskforge.pipeline.stopping import Deadline, RunStopped, stop_reason
from taskforge.pipeline.task_sink import TaskSink, accepted_so_far


@dataclass
class Res:
    candidate_id: str
    task: Any


@dataclass
class Cand:
    candidate_id: str


class RecordingWriter:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def add_repo_archive(self, repo: str, commit: str, src: Path) -> None:
        self.calls.append(("archive", repo))

    def add(self, task: Any) -> bool:
        self.calls.append(("add", task))
        return True

    def flush(self) -> None:
        self.calls.append(("flush", None))


def test_sink_archives_once_adds_each_task_once_and_flushes_on_its_timer(tmp_path: Path) -> None:
    w = RecordingWriter()
    sink = TaskSink(w, "repo", "abc", tmp_path, flush_every_s=0.0)
    assert sink.add([Res("a", "TA"), Res("b", None)]) == 1
    assert sink.add([Res("a", "TA"), Res("c", "TC")]) == 1
    assert [c for c in w.calls if c[0] != "flush"] == [("archive", "repo"), ("add", "TA"), ("add", "TC")]
    assert ("flush", None) in w.calls
    lazy = RecordingWriter()
    TaskSink(lazy, "repo", "abc", tmp_path, flush_every_s=3600).add([Res("a", "TA")])
    assert ("flush", None) not in lazy.calls  # a shard per task would be thousands of tiny files


def test_sink_finish_stores_the_archive_of_a_source_without_tasks(tmp_path: Path) -> None:
    w = RecordingWriter()
    TaskSink(w, "repo", "abc", tmp_path).finish()
    assert w.calls == [("archive", "repo"), ("flush", None)]


def test_accepted_so_far_keeps_order_and_cap() -> None:
    order = [Cand(c) for c in "abcd"]
    results = {"b": Res("b", "TB"), "d": Res("d", "TD"), "a": Res("a", None)}
    assert [r.task for r in accepted_so_far(order, results, None)] == ["TB", "TD"]
    assert [r.task for r in accepted_so_far(order, results, 1)] == ["TB"]


def test_deadline_and_stop_reason() -> None:
    Deadline().check()
    Deadline.after(60).check()
    with pytest.raises(RunStopped) as info:
        Deadline(at=0.0, minutes=2).check()
    assert stop_reason(info.value) == "time cap of 2 min reached"
    assert stop_reason(KeyboardInterrupt()) == "SIGINT (Ctrl-C)"


def test_a_candidate_stopped_while_its_cleanup_fails_is_undecided_not_an_internal_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """cattrs 26.2 at its CPU cap: the stop unwound through the candidate's workspace, whose removal failed (a
    test was still writing into it), and that ``OSError`` became the candidate's verdict, ``internal_error``,
    journaled, never retried. The stop goes on; a plain bug of ours is still an ``internal_error``."""
    from types import SimpleNamespace

    from taskforge.validate import steps

    class Stopped:
        def __init__(self, job: Any) -> None:
            pass

        def run(self) -> Any:
            try:
                raise RunStopped("SIGTERM")
            finally:
                raise OSError(39, "Directory not empty", "examples")

        def cleanup(self) -> None:
            pass

    job = SimpleNamespace(candidate=SimpleNamespace(candidate_id="stub:x.f"))
    monkeypatch.setattr(steps, "_Validation", Stopped)
    with pytest.raises(RunStopped):
        steps.validate_candidate(job)  # type: ignore[arg-type]

    class Broken(Stopped):
        def run(self) -> Any:
            raise OSError(2, "No such file")

    monkeypatch.setattr(steps, "_Validation", Broken)
    res = steps.validate_candidate(job)  # type: ignore[arg-type]
    assert res.rejected is not None and res.rejected.reason.value == "internal_error"
