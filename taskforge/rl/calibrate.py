"""Difficulty from outcomes: a one-parameter IRT (Rasch) fit of per-task difficulties to graded rollouts.

Model: a *respondent* r (a policy, or one phase of a training run, whose skill changes) solves task j
with probability ``sigmoid(theta_r - b_j)``. Given, per (task, respondent), ``s`` successes in ``n``
graded rollouts, ``fit_rasch`` finds the regularised maximum-likelihood (MAP) estimate

    max  sum s (theta_r - b_j) - n log(1 + exp(theta_r - b_j))  -  l2_b/2 sum b_j^2  -  l2_theta/2 sum theta_r^2

by alternating Newton steps (the Hessian is diagonal within each block; each step is clipped), each
followed by the exact optimal common shift of ``b`` and ``theta`` (the one direction only the penalties
determine). The
penalties fix the model's free location and keep a task that every rollout passed (or failed) at a
finite value. ``b`` is in logits; ``taskforge.rl.curriculum.effective_difficulties`` maps it onto
the static score's scale for the sampler.

Where outcomes come from:

* ``taskforge calibrate DIR --policy ...``: every task, ``rollouts`` graded patches per policy; each
  policy (``name`` or ``name:key=value,...``) is one respondent. ``calibrate_dataset`` here.
* a training run (``train(..., calibrate=True)``): ``RecordingSampler`` wraps the loop's sampler and
  records every graded group; a respondent is a window of ``bucket`` steps (the policy learns).

Either way the fit is written back to the dataset (``taskforge.dataset.calibration``: the columns
``calibrated_difficulty`` and ``calibration_observations``), and the sampler of the next run prefers it.
``spearman`` / ``rank_agreement`` report how well the static score predicts the calibrated value.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from taskforge.core.errors import ConfigError
from taskforge.core.task import Task
from taskforge.dataset.calibration import Calibration, write_calibration
from taskforge.rl.curriculum import GroupOutcome, SamplerStats, TaskSampler
from taskforge.rl.grading import Grader
from taskforge.rl.policies import Policy

MAX_STEP = 2.0  # largest Newton move of one parameter per iteration, in logits


@dataclass(frozen=True, slots=True)
class Cell:
    """The graded rollouts of one task by one respondent: successes out of trials."""

    instance_id: str
    respondent: str
    successes: int
    trials: int


@dataclass(frozen=True, slots=True)
class RaschFit:
    """Fitted difficulties (logits) of the observed tasks, their observation counts, respondent skills."""

    difficulty: Mapping[str, float]
    observations: Mapping[str, int]
    ability: Mapping[str, float]
    iterations: int
    converged: bool

    def calibrations(self, source: str) -> dict[str, Calibration]:
        return {k: Calibration(v, int(self.observations[k]), source) for k, v in self.difficulty.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": len(self.difficulty), "respondents": len(self.ability), "iterations": self.iterations,
                "converged": self.converged, "ability": dict(self.ability),
                "observations": int(sum(self.observations.values()))}


def fit_rasch(cells: Iterable[Cell], *, l2_difficulty: float = 0.05, l2_ability: float = 0.01,
              max_iter: int = 1000, tol: float = 1e-6) -> RaschFit:
    """The MAP Rasch fit of ``cells`` (module doc). Tasks and respondents without trials are left out."""
    rows = [c for c in cells if c.trials > 0]
    if not rows:
        raise ConfigError("no graded rollouts to calibrate from; grade at least one rollout per task")
    if l2_difficulty <= 0 or l2_ability <= 0:
        raise ConfigError(f"the penalties must be > 0 (got {l2_difficulty}, {l2_ability}): without them a "
                          "task every rollout passed has no finite difficulty")
    tasks = sorted({c.instance_id for c in rows})
    resp = sorted({c.respondent for c in rows})
    ti = {t: i for i, t in enumerate(tasks)}
    ri = {r: i for i, r in enumerate(resp)}
    j = np.asarray([ti[c.instance_id] for c in rows])
    r = np.asarray([ri[c.respondent] for c in rows])
    s = np.asarray([c.successes for c in rows], dtype=np.float64)
    n = np.asarray([c.trials for c in rows], dtype=np.float64)
    b = np.zeros(len(tasks))
    theta = np.zeros(len(resp))
    converged, it = False, 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        p = 1.0 / (1.0 + np.exp(-(theta[r] - b[j])))
        grad_b = np.bincount(j, n * p - s, len(b)) - l2_difficulty * b
        hess_b = np.bincount(j, n * p * (1 - p), len(b)) + l2_difficulty
        step_b = np.clip(grad_b / hess_b, -MAX_STEP, MAX_STEP)
        b += step_b
        p = 1.0 / (1.0 + np.exp(-(theta[r] - b[j])))
        grad_t = np.bincount(r, s - n * p, len(theta)) - l2_ability * theta
        hess_t = np.bincount(r, n * p * (1 - p), len(theta)) + l2_ability
        step_t = np.clip(grad_t / hess_t, -MAX_STEP, MAX_STEP)
        theta += step_t
        # The likelihood is unchanged by shifting b and theta together; only the penalties fix that shift,
        # which block steps find slowly. Take the optimal shift exactly.
        shift = -(l2_difficulty * b.sum() + l2_ability * theta.sum()) / (l2_difficulty * len(b) + l2_ability * len(theta))
        b += shift
        theta += shift
        if max(float(np.abs(step_b).max()), float(np.abs(step_t).max())) < tol:
            converged = True
            break
    obs = np.bincount(j, n, len(b))
    return RaschFit({t: float(b[i]) for t, i in ti.items()}, {t: int(obs[i]) for t, i in ti.items()},
                    {x: float(theta[i]) for x, i in ri.items()}, it, converged)


class OutcomeRecorder:
    """Successes and trials per (task, respondent), accumulated; JSON-able for resumable runs."""

    def __init__(self) -> None:
        self._cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])

    def add(self, instance_id: str, respondent: str, rewards: Sequence[float]) -> None:
        cell = self._cells[(instance_id, respondent)]
        cell[0] += sum(1 for x in rewards if x >= 0.5)
        cell[1] += len(rewards)

    def cells(self) -> list[Cell]:
        return [Cell(t, r, s, n) for (t, r), (s, n) in sorted(self._cells.items())]

    def __len__(self) -> int:
        return sum(n for _, n in self._cells.values())

    def to_list(self) -> list[list[Any]]:
        return [[c.instance_id, c.respondent, c.successes, c.trials] for c in self.cells()]

    def load_list(self, rows: Iterable[Sequence[Any]]) -> None:
        self._cells.clear()
        for t, r, s, n in rows:
            self._cells[(str(t), str(r))] = [int(s), int(n)]


class RecordingSampler:
    """A ``TaskSampler`` that records every graded group it is updated with (for a training run's fit).

    ``tasks`` is the loop's pool (the same list object, so tasks added while training are named too);
    the respondent of step ``k`` is ``f"{prefix}{(k - 1) // bucket}"``. Everything else is the wrapped
    sampler's; its state holds the recorded outcomes under ``recorded_outcomes`` (ignored by plain
    samplers, so a run may be resumed with or without recording).
    """

    def __init__(self, inner: TaskSampler, tasks: Sequence[Task], *, bucket: int = 5, prefix: str = "step") -> None:
        if bucket < 1:
            raise ConfigError(f"calibration bucket must be >= 1 step, got {bucket}")
        self.inner = inner
        self.tasks = tasks
        self.bucket = bucket
        self.prefix = prefix
        self.recorder = OutcomeRecorder()
        self._updates = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def target(self) -> float | None:
        return self.inner.target

    def sample(self, k: int) -> list[int]:
        return self.inner.sample(k)

    def add_tasks(self, difficulties: Sequence[float]) -> None:
        self.inner.add_tasks(difficulties)

    def adopt_pool(self, difficulties: Sequence[float]) -> None:
        self.inner.adopt_pool(difficulties)

    def update(self, outcomes: Iterable[GroupOutcome]) -> SamplerStats:
        groups = list(outcomes)
        stats = self.inner.update(groups)
        respondent = f"{self.prefix}{(stats.step - 1) // self.bucket}"
        for g in groups:
            self.recorder.add(self.tasks[g.index].instance_id, respondent, g.rewards)
        return stats

    def state_dict(self) -> dict[str, Any]:
        return {**self.inner.state_dict(), "recorded_outcomes": self.recorder.to_list()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.inner.load_state_dict(state)
        self.recorder.load_list(state.get("recorded_outcomes", ()))

    def fit(self, **kwargs: Any) -> RaschFit:
        return fit_rasch(self.recorder.cells(), **kwargs)


def observe(tasks: Sequence[Task], policy: Policy, grader: Grader, respondent: str, rollouts: int,
            recorder: OutcomeRecorder, batch: int = 16) -> None:
    """``rollouts`` graded patches of ``policy`` on every task, recorded under ``respondent``."""
    for start in range(0, len(tasks), batch):
        chunk = tasks[start:start + batch]
        proposals = [(t, policy.propose(t, rollouts)) for t in chunk]
        pairs = [(t, p) for t, patches in proposals for p in patches]
        grades = grader.grade(pairs)
        if len(grades) != len(pairs):
            raise ConfigError(f"grader returned {len(grades)} grades for {len(pairs)} patches")
        k = 0
        for t, patches in proposals:
            recorder.add(t.instance_id, respondent, [g.reward for g in grades[k:k + len(patches)]])
            k += len(patches)


def calibrate_dataset(tasks: Sequence[Task], policies: Sequence[tuple[str, Policy]], grader: Grader, *,
                      rollouts: int = 8, **fit_kwargs: Any) -> RaschFit:
    """Grade ``rollouts`` patches per task from each (respondent name, policy) and fit the difficulties."""
    if rollouts < 1 or not policies or not tasks:
        raise ConfigError(f"calibration needs tasks, at least one policy and rollouts >= 1 "
                          f"(got {len(tasks)} tasks, {len(policies)} policies, rollouts {rollouts})")
    recorder = OutcomeRecorder()
    for name, policy in policies:
        observe(tasks, policy, grader, name, rollouts, recorder)
    return fit_rasch(recorder.cells(), **fit_kwargs)


def write_fit(dataset: str | Path, fit: RaschFit, source: str) -> int:
    """Write ``fit``'s difficulties back to the dataset directory (merged with earlier calibrations)."""
    return write_calibration(Path(dataset), fit.calibrations(source), source=source)


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    for v in np.unique(x):  # ties share their mean rank
        tie = x == v
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (ties averaged); NaN with fewer than 3 pairs or a constant side."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(x) != len(y):
        raise ConfigError(f"spearman needs pairs, got {len(x)} and {len(y)} values")
    if len(x) < 3:
        return math.nan
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def rank_agreement(tasks: Sequence[Task], difficulty: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """Per strategy (and ``all``): Spearman of static score vs calibrated difficulty over the calibrated tasks."""
    groups: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        if t.instance_id in difficulty:
            groups[t.strategy].append(t)
            groups["all"].append(t)
    out = {}
    for name, ts in sorted(groups.items()):
        rho = spearman([t.difficulty.score for t in ts], [difficulty[t.instance_id] for t in ts])
        out[name] = {"tasks": len(ts), "spearman": None if math.isnan(rho) else round(rho, 4)}
    return out
