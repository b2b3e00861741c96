"""The grading seam of the RL loop: (task, patch) pairs in, one ``GradeResult`` per pair out.

* ``SandboxGrader``: the real reward path (``taskforge.reward.reward.reward_many``: a fresh sandbox per
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
from pathlib import Path
from typing import Any, Protocol

from taskforge.core.settings import Settings
from taskforge.core.task import Task
from taskforge.reward.result import RewardFlag, RewardResult


@dataclass(frozen=True, slots=True)
class GradeResult:
    """The grade of one patch: binary reward, fraction of hidden tests passed, flags, wall time."""

    instance_id: str
    reward: float  # 0.0 or 1.0
    fraction: float = 0.0  # share of FAIL_TO_PASS + PASS_TO_PASS that passed
    flags: tuple[RewardFlag, ...] = ()  # what the reward flagged (tampering, timeout, ...)
    seconds: float = 0.0
    monitor: tuple[str, ...] = ()  # the patch monitor's rules that fired (one entry per finding)

    def to_dict(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "reward": self.reward, "fraction": self.fraction,
                "flags": list(self.flags), "seconds": self.seconds, "monitor": list(self.monitor)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GradeResult:
        return cls(str(d["instance_id"]), float(d["reward"]), float(d.get("fraction", 0.0)),
                   tuple(RewardFlag(f) for f in d.get("flags", ())), float(d.get("seconds", 0.0)),
                   tuple(d.get("monitor", ())))


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
    """The real reward path: ``taskforge.reward.reward.reward_many`` on the configured sandbox backend.

    Original trees come from the dataset directory's repo archives; the sandbox backend is built once
    (``sandboxes.selection.make_sandbox``) and reused by every step; environments are cached by the backend.
    """

    def __init__(self, dataset_dir: str | Path, settings: Settings | None = None, jobs: int | None = None) -> None:
        self.dataset_dir = Path(dataset_dir)
        self.settings = settings or Settings.load()
        self.jobs = jobs if jobs is not None else self.settings.jobs
        self._sandbox: Any = None

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[GradeResult]:
        # lazy: sandboxes are only imported when grading for real
        from sandboxes.selection import make_sandbox
        from taskforge.reward.reward import reward_many
        from taskforge.reward.workspace import DatasetTrees

        if self._sandbox is None:
            self._sandbox = make_sandbox(self.settings)
        results = reward_many(list(pairs), sandbox=self._sandbox, trees=DatasetTrees(self.dataset_dir),
                              settings=self.settings, jobs=self.jobs)
        return [from_reward_result(r) for r in results]


def from_reward_result(r: RewardResult) -> GradeResult:
    """A ``taskforge.reward.reward.RewardResult`` as the loop's ``GradeResult``."""
    timings = dict(r.timings)
    seconds = float(timings.get("total_s", sum(timings.values())))
    return GradeResult(r.instance_id, float(r.score), float(r.fraction), tuple(r.flags), seconds,
                       tuple(f.rule for f in r.findings))
