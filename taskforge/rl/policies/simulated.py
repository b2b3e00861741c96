"""``simulated``: an item-response learner for measuring curricula (a simulation, not a model)."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from taskforge.core.task import Task
from taskforge.rl.answer_patch import wrong_patch
from taskforge.rl.grading import GradedGroup
from taskforge.rl.policies.base import PolicyOptions


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class SimulatedPolicy:
    """A SIMULATED learner for measuring curricula; it does not write code.

    Item-response model: task *i* has a latent difficulty ``b_i = scale * score_i + offset + e_i``
    (``e_i ~ N(0, noise)``, fixed per task and seed: the static score is an imperfect proxy), and the
    policy solves it with probability ``p_i = sigmoid(skill - b_i)``. On a success it returns the gold
    patch, on a failure a plausible *wrong* patch (the gold patch with its returned values replaced,
    else the empty patch), so the grader grades real patches.

    Learning is GRPO on the one parameter ``skill``: for every graded group the advantages are
    ``A_j = (r_j - mean r) / std r`` (zero for zero-variance groups), and
    ``skill += lr * mean_j(A_j * d log pi(y_j) / d skill)`` over all rollouts handed to ``update``
    (``d log p / d skill = 1 - p`` for a success, ``-p`` for a failure). In expectation a group adds
    ``lr * sqrt(p (1 - p))``: only mixed-outcome groups teach, most at ``p = 0.5``.
    """

    name = "simulated"

    def __init__(self, options: PolicyOptions | None = None) -> None:
        o = options or PolicyOptions()
        self.options = o
        self.skill = float(o.skill)
        self._rng = np.random.Generator(np.random.PCG64(o.seed))
        self._wrong: dict[str, str] = {}

    def latent_difficulty(self, task: Task) -> float:
        o = self.options
        digest = hashlib.sha256(f"{o.seed}:{task.instance_id}".encode()).digest()
        noise = float(np.random.Generator(np.random.PCG64(int.from_bytes(digest[:8], "big"))).normal())
        return o.difficulty_scale * task.difficulty.score + o.difficulty_offset + o.difficulty_noise * noise

    def solve_probability(self, task: Task) -> float:
        return _sigmoid(self.skill - self.latent_difficulty(task))

    def propose(self, task: Task, n: int) -> list[str]:
        p = self.solve_probability(task)
        wrong = self._wrong.get(task.instance_id)
        if wrong is None:
            wrong = self._wrong[task.instance_id] = wrong_patch(task.patch)
        return [task.patch if u < p else wrong for u in self._rng.random(n)]

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        grad, loss, count = 0.0, 0.0, 0
        for g in groups:
            r = np.asarray(g.rewards, dtype=np.float64)
            count += len(r)
            if r.size == 0 or r.std() == 0:
                continue
            adv = (r - r.mean()) / r.std()
            p = min(max(self.solve_probability(g.task), 1e-9), 1 - 1e-9)
            dlogp = np.where(r >= 0.5, 1.0 - p, -p)
            logp = np.where(r >= 0.5, math.log(p), math.log(1.0 - p))
            grad += float((adv * dlogp).sum())
            loss -= float((adv * logp).sum())
        if count:
            self.skill += self.options.learning_rate * grad / count
        return {"loss": loss / count if count else 0.0, "skill": self.skill}

    def state_dict(self) -> dict[str, Any]:
        return {"name": self.name, "skill": self.skill, "seed": self.options.seed,
                "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        # The seed fixes each task's latent difficulty: it is part of the learner, not just of its RNG.
        self.options = dataclasses.replace(self.options, seed=int(state["seed"]))
        self.skill = float(state["skill"])
        self._rng.bit_generator.state = state["rng"]


def make_simulated(options: PolicyOptions) -> SimulatedPolicy:
    return SimulatedPolicy(options)
