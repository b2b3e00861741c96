"""What a validation worker gets and gives back: ``CandidateJob`` -> ``CandidateResult`` (picklable values).

Also the test-selection helpers of ``taskforge.validate.steps``: which lines a deletion changed and which
tests can be hidden.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from generators.candidates import Candidate
from taskforge.core.linediff import opcodes
from taskforge.core.outcomes import Accepted, CandidateOutcome, Rejected
from taskforge.core.task import Task

MODES = ("default", "naive")


@dataclass(frozen=True, slots=True)
class CandidateJob:
    profile_dir: str
    candidate: Candidate
    settings: Mapping[str, Any]
    provenance: Mapping[str, Any] = field(default_factory=dict)  # generator parameters, seed, run id
    mode: str = "default"  # "default" | "naive" (see the module docstring)
    sandbox: Any = None  # a picklable ``Sandbox`` to use instead of the one ``settings`` name (tests, fakes)


@dataclass(frozen=True, slots=True)
class CandidateResult:
    """One validated candidate: its outcome (``Accepted | Rejected``) and what validating it cost."""

    candidate_id: str
    outcome: CandidateOutcome
    test_seconds: float = 0.0  # summed wall time of sandbox runs (the CPU cost that matters)
    seconds: float = 0.0
    stages: Mapping[str, float] = field(default_factory=dict)
    runs: int = 0  # sandbox runs made (test runs and gradings)
    stage_cpu: Mapping[str, float] = field(default_factory=dict)  # this process's CPU seconds per stage

    @property
    def task(self) -> Task | None:
        return self.outcome.task if isinstance(self.outcome, Accepted) else None

    @property
    def rejected(self) -> Rejected | None:
        return self.outcome if isinstance(self.outcome, Rejected) else None

    def to_dict(self) -> dict[str, Any]:
        from taskforge.dataset.schema import task_to_row

        return {"candidate_id": self.candidate_id,
                "task": task_to_row(self.task) if self.task is not None else None,
                "rejected": self.rejected.to_dict() if self.rejected is not None else None,
                "test_seconds": self.test_seconds, "seconds": self.seconds, "stages": dict(self.stages),
                "runs": self.runs, "stage_cpu": dict(self.stage_cpu)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CandidateResult:
        from taskforge.dataset.schema import row_to_task

        outcome: CandidateOutcome = (Accepted(row_to_task(d["task"])) if d.get("task")
                            else Rejected.from_dict(d["rejected"]))
        return cls(d["candidate_id"], outcome,
                   float(d.get("test_seconds", 0.0)), float(d.get("seconds", 0.0)), dict(d.get("stages", {})),
                   int(d.get("runs", 0)), dict(d.get("stage_cpu", {})))



def changed_lines(before: str | None, after: str | None) -> list[tuple[int, int]]:
    """1-based inclusive line ranges of ``before`` that ``after`` replaced or deleted (an insertion: the
    lines around it). A removed file: all of it; a new file: nothing (no test ran its lines)."""
    if before is None:
        return []
    old = before.splitlines()
    if after is None:
        return [(1, max(1, len(old)))]
    ranges = []
    for tag, i1, i2, _, _ in opcodes(old, after.splitlines()):
        if tag == "equal":
            continue
        ranges.append((i1 + 1, i2) if i2 > i1 else (max(1, i1), i1 + 1))
    return ranges


def hideable(nodeid: str, spec: Any) -> bool:
    """A test the hiding can remove: a test function in a Python test file (not a doctest elsewhere)."""
    from generators.static_index import is_test_file

    path = nodeid.split("::", 1)[0]
    return path.endswith(".py") and is_test_file(path, spec)
