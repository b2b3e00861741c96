"""The grading seam of the RL loop: (task, patch) pairs in, one ``GradeResult`` per pair out.

* ``SandboxGrader``: the real reward path (``taskforge.reward.reward_many``: a fresh sandbox per
  grading, hidden tests restored, tamper canaries). Imported lazily so the loop imports no sandbox code.
* ``FakeGrader``: reward 1.0 iff the patch is byte-for-byte the gold patch. For unit tests and for the
  curriculum benchmark, where the simulated policy returns either the gold patch or a wrong one, so the
  fake agrees with the real reward path on every patch it will ever see (the oracle/null end-to-end
  tests check that the real path gives 1 to the gold patch and 0 to the empty one).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from taskforge.settings import Settings
from taskforge.task import Task


@dataclass(frozen=True, slots=True)
class GradeResult:
    """The grade of one patch: binary reward, fraction of hidden tests passed, flags, wall time."""

    instance_id: str
    reward: float  # 0.0 or 1.0
    fraction: float = 0.0  # share of FAIL_TO_PASS + PASS_TO_PASS that passed
    flags: tuple[str, ...] = ()  # e.g. "tampering", "timeout", "patch_rejected"
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "reward": self.reward, "fraction": self.fraction,
                "flags": list(self.flags), "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GradeResult:
        return cls(str(d["instance_id"]), float(d["reward"]), float(d.get("fraction", 0.0)),
                   tuple(d.get("flags", ())), float(d.get("seconds", 0.0)))


@dataclass(frozen=True, slots=True)
class GradedGroup:
    """The G rollouts of one task in one step: which task, the patches, and their grades."""

    index: int  # position of the task in the pool the sampler draws from
    task: Task
    patches: tuple[str, ...]
    grades: tuple[GradeResult, ...] = field(default=())

    @property
    def rewards(self) -> tuple[float, ...]:
        return tuple(g.reward for g in self.grades)

    @property
    def pass_rate(self) -> float:
        return statistics.fmean(self.rewards) if self.grades else 0.0

    @property
    def zero_variance(self) -> bool:
        return len(set(self.rewards)) <= 1


class Grader(Protocol):
    """Grades many (task, patch) pairs, in parallel where the backend allows; order is kept."""

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[GradeResult]: ...


class FakeGrader:
    """Reward 1.0 iff ``patch == task.patch`` (the gold patch). No sandbox; for tests and the benchmark."""

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[GradeResult]:
        out = []
        for task, patch in pairs:
            t0 = time.perf_counter()
            ok = bool(task.patch) and patch == task.patch
            out.append(GradeResult(task.instance_id, 1.0 if ok else 0.0, 1.0 if ok else 0.0, (),
                                   time.perf_counter() - t0))
        return out


class SandboxGrader:
    """The real reward path: ``taskforge.reward.reward_many`` on the configured sandbox backend."""

    def __init__(self, settings: Settings | None = None, jobs: int | None = None) -> None:
        self.settings = settings or Settings.load()
        self.jobs = jobs if jobs is not None else self.settings.jobs

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[GradeResult]:
        from taskforge.reward import reward_many  # lazy: sandboxes are only needed when grading for real

        results = reward_many(list(pairs), settings=self.settings, jobs=self.jobs)
        return [_from_reward_result(task.instance_id, r) for (task, _), r in zip(pairs, results, strict=True)]


def _from_reward_result(instance_id: str, r: Any) -> GradeResult:
    return GradeResult(instance_id, float(r.reward), float(r.fraction), tuple(r.flags), float(r.seconds))
