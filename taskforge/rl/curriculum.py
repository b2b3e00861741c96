"""Which task to train on next: a curriculum that moves to harder tasks as the pass rate climbs.

``CurriculumSampler`` is a ``torch.utils.data.Sampler`` over task indices (usable in a plain
``DataLoader``) with an ``update(outcomes)`` method that takes the graded groups of a step. It combines
three published ideas:

* **Belief per task** (Beta posterior). Task *i* has a pass-rate belief ``Beta(a_i, b_i)`` whose prior
  comes from its static difficulty score ``d_i`` *relative to the current target* ``T``:
  ``p0_i = sigmoid(logit(beta) + slope * (T - d_i))`` with ``prior_strength`` pseudo-observations.
  A task at the target is believed to pass at the target pass rate ``beta``; easier tasks higher.
  Observed successes/failures are added on top and decay with a half-life (in updates), because the
  policy keeps changing and old outcomes go stale.
* **Learnability priority** ``p(1 - p)`` of the posterior mean (the variance of a Bernoulli reward:
  the groups GRPO can learn from are the ones with mixed outcomes), sharpened by ``1/temperature``.
* **Moving target** (AdaRFT, Shi et al. 2025): after every update
  ``T <- clip(T + target_step * tanh(sensitivity * (R - P)), min d, max d)`` where ``R`` is the
  observed pass rate and ``P`` the pass rate the prior at ``T`` predicted for the same tasks, both
  over the last ``window`` updates. ``T`` rises while the policy passes more than predicted and falls
  when it passes less. Deviation from AdaRFT, which uses ``R - beta``: AdaRFT samples *at* the target,
  where ``P = beta`` and the two rules agree; this sampler also samples off-target (learnable tasks
  its evidence found elsewhere, stale tasks), and comparing with the prediction for the tasks actually
  sampled keeps ``T`` on the policy's frontier instead of stalling whenever the batch passes ~beta.
* **Staleness** (Prioritized Level Replay, Jiang et al. 2021): the sampling distribution is
  ``(1 - rho) * P_learnability + rho * P_staleness`` with ``P_staleness`` proportional to the number of
  updates since the task was last observed, so no task starves.

Difficulties: each task's static score, or, where the dataset holds a **calibrated** difficulty (fitted
from observed outcomes, ``taskforge.rl.calibrate``), that value mapped onto the score scale
(``effective_difficulties``); a calibrated value always wins over the static score. The pool can grow
while training (``add_tasks``: on-demand generation, ``taskforge.rl.replenish``); new tasks start with
no evidence and the staleness of a task never observed.

Zero-variance groups (all G rollouts equal) are counted per task and per update. Everything random
comes from one seeded numpy ``Generator`` whose state is part of ``state_dict()``: the same seed and the
same updates give the same samples, and a saved state resumes exactly (JSON, see ``save``/``load``).
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from torch.utils.data import Sampler

from taskforge.core.errors import ConfigError
from taskforge.core.files import write_atomic
from taskforge.core.task import Task

STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """The graded rollouts of one task in one step: its index in the pool and one reward per rollout."""

    index: int
    rewards: tuple[float, ...]

    @property
    def successes(self) -> int:
        return sum(1 for r in self.rewards if r >= 0.5)

    @property
    def zero_variance(self) -> bool:
        """All rollouts got the same reward: GRPO advantages are all zero, nothing to learn."""
        return len(set(self.rewards)) <= 1

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "rewards": list(self.rewards)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GroupOutcome:
        return cls(int(d["index"]), tuple(float(r) for r in d["rewards"]))


@dataclass(frozen=True, slots=True)
class SamplerStats:
    """What one ``update`` saw and where it left the curriculum."""

    step: int
    pass_rate: float  # mean reward of this update's rollouts
    rolling_pass_rate: float  # mean over the last `window` updates
    target: float | None  # curriculum target difficulty (None for samplers without one)
    zero_variance_fraction: float  # groups whose rollouts all got the same reward

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class CurriculumConfig:
    """Knobs of the curriculum; the defaults are the ones the benchmark measures."""

    target_pass_rate: float = 0.5  # beta: the target rises while the rolling pass rate is above this
    target_step: float = 0.05  # largest move of the target per update, in difficulty-score units
    target_sensitivity: float = 4.0  # alpha in tanh(alpha * (R - beta))
    initial_target: float | None = None  # None: the initial_quantile of the pool's difficulty scores
    initial_quantile: float = 0.1  # where the target starts when initial_target is None
    window: int = 3  # updates in the rolling pass rate
    prior_strength: float = 2.0  # pseudo-observations of the difficulty prior
    prior_slope: float = 8.0  # logits of pass probability per unit of difficulty score
    evidence_half_life: float = 5.0  # updates after which an observed outcome counts half
    temperature: float = 0.05  # priority = learnability ** (1 / temperature): sharp, near-greedy
    staleness_mix: float = 0.02  # rho: share of the sampling distribution given to staleness

    def __post_init__(self) -> None:
        if not 0.0 < self.target_pass_rate < 1.0:
            raise ConfigError(f"target_pass_rate must be in (0, 1), got {self.target_pass_rate}")
        if not 0.0 <= self.staleness_mix <= 1.0:
            raise ConfigError(f"staleness_mix must be in [0, 1], got {self.staleness_mix}")
        if self.temperature <= 0 or self.prior_strength <= 0 or self.evidence_half_life <= 0:
            raise ConfigError("temperature, prior_strength and evidence_half_life must be > 0; "
                              f"got {self.temperature}, {self.prior_strength}, {self.evidence_half_life}")
        if self.window < 1:
            raise ConfigError(f"window must be >= 1, got {self.window}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CurriculumConfig:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


class TaskSampler(Protocol):
    """What the RL loop needs from a sampler (``CurriculumSampler`` and ``UniformSampler`` have it)."""

    @property
    def target(self) -> float | None: ...

    def sample(self, k: int) -> list[int]: ...

    def update(self, outcomes: Iterable[GroupOutcome]) -> SamplerStats: ...

    def add_tasks(self, difficulties: Sequence[float]) -> None: ...

    def adopt_pool(self, difficulties: Sequence[float]) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def effective_difficulties(tasks: Sequence[Task], calibration: Mapping[str, float] | None = None) -> list[float]:
    """Per task: its calibrated difficulty on the static-score scale where one exists, else its score.

    Calibrated difficulties are logits (``P(pass) = sigmoid(skill - b)``); they are mapped onto the
    score scale by the robust (Theil-Sen) line ``b ~ alpha + gamma * score`` over the calibrated tasks,
    ``d = (b - alpha) / gamma``: the score an uncalibrated task of that latent difficulty would have
    on average, so calibrated and uncalibrated tasks stay comparable in one pool. With fewer than three
    calibrated tasks, no spread, or a line that does not rise, the calibrated values are centred on
    their tasks' mean score at ``prior_slope`` (8) logits per score unit instead.
    """
    scores = np.asarray([t.difficulty.score for t in tasks], dtype=np.float64)
    if not calibration:
        return scores.tolist()
    idx = [i for i, t in enumerate(tasks) if t.instance_id in calibration]
    if not idx:
        return scores.tolist()
    b = np.asarray([float(calibration[tasks[i].instance_id]) for i in idx])
    s = scores[idx]
    gamma, alpha = _theil_sen(s, b) if len(idx) >= 3 else (0.0, 0.0)
    if gamma > 1e-6:
        mapped = (b - alpha) / gamma
    else:
        mapped = float(s.mean()) + (b - float(b.mean())) / CurriculumConfig().prior_slope
    out = scores.copy()
    out[idx] = mapped
    return out.tolist()


def _theil_sen(x: np.ndarray, y: np.ndarray, max_points: int = 2000) -> tuple[float, float]:
    """Slope and intercept of the Theil-Sen line (median pairwise slope): one outlier cannot tilt it."""
    if len(x) > max_points:  # evenly spaced subsample: deterministic, O(max_points^2) pairs
        keep = np.linspace(0, len(x) - 1, max_points).astype(int)
        x, y = x[keep], y[keep]
    i, j = np.triu_indices(len(x), 1)
    dx = x[j] - x[i]
    ok = np.abs(dx) > 1e-9
    if not ok.any():
        return 0.0, 0.0
    gamma = float(np.median((y[j] - y[i])[ok] / dx[ok]))
    return gamma, float(np.median(y - gamma * x))


def _checked_difficulties(difficulties: Sequence[float]) -> np.ndarray:
    d = np.asarray(list(difficulties), dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ConfigError(f"a sampler needs at least one task difficulty, got {d.size}")
    if not np.all(np.isfinite(d)):
        raise ConfigError("task difficulty scores must be finite numbers (check the dataset's difficulty column)")
    return d


class _SamplerBase(Sampler[int]):
    """Shared plumbing: seeded numpy RNG, step counter, rolling pass rate, zero-variance counts, JSON."""

    kind = "base"

    def __init__(self, difficulties: Sequence[float], *, seed: int = 0, batch_size: int = 1,
                 num_samples: int | None = None, window: int = 3) -> None:
        self.difficulties = _checked_difficulties(difficulties)
        self.seed = int(seed)
        self.batch_size = max(1, int(batch_size))
        self.num_samples = int(num_samples) if num_samples is not None else len(self.difficulties)
        self._rng = np.random.Generator(np.random.PCG64(self.seed))
        self.step = 0
        self._window: deque[float] = deque(maxlen=window)
        n = len(self.difficulties)
        self.times_observed = np.zeros(n, dtype=np.int64)
        self.zero_variance_groups = np.zeros(n, dtype=np.int64)
        self.last_observed = np.full(n, -1, dtype=np.int64)

    @classmethod
    def from_tasks(cls, tasks: Sequence[Task], *, calibration: Mapping[str, float] | None = None,
                   **kwargs: Any) -> Any:
        """A sampler over ``tasks``; ``calibration`` (instance id -> calibrated difficulty) wins over scores."""
        return cls(effective_difficulties(tasks, calibration), **kwargs)

    def add_tasks(self, difficulties: Sequence[float]) -> None:
        """Grow the pool by tasks with these difficulties (indices continue after the current ones).

        A new task has no evidence and counts as never observed (so staleness reaches it soon)."""
        new = _checked_difficulties(difficulties)
        self.difficulties = np.concatenate([self.difficulties, new])
        self.num_samples += len(new)
        self._grow_counters()

    def adopt_pool(self, difficulties: Sequence[float]) -> None:
        """Start over on a pool of these difficulties (a resumed run whose pool grew while training):
        per-task counters are reset to the new size; ``load_state_dict`` then fills them in."""
        self.difficulties = _checked_difficulties(difficulties)
        self.num_samples = len(self.difficulties)
        self.times_observed = np.zeros(0, dtype=np.int64)
        self.zero_variance_groups = np.zeros(0, dtype=np.int64)
        self.last_observed = np.zeros(0, dtype=np.int64)
        self._grow_counters()

    def _grow_counters(self) -> None:
        k = len(self.difficulties) - len(self.times_observed)
        self.times_observed = np.concatenate([self.times_observed, np.zeros(k, dtype=np.int64)])
        self.zero_variance_groups = np.concatenate([self.zero_variance_groups, np.zeros(k, dtype=np.int64)])
        self.last_observed = np.concatenate([self.last_observed, np.full(k, -1, dtype=np.int64)])

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self) -> Iterator[int]:
        # Lazily, one batch at a time: with DataLoader(num_workers=0) an update() between batches
        # changes what the next batch draws.
        left = self.num_samples
        while left > 0:
            yield from self.sample(min(self.batch_size, left))
            left -= min(self.batch_size, left)

    @property
    def target(self) -> float | None:
        return None

    @property
    def rolling_pass_rate(self) -> float:
        return float(np.mean(self._window)) if self._window else 0.0

    def probabilities(self) -> np.ndarray:
        """The sampling distribution over tasks (uniform here; the curriculum overrides it)."""
        n = len(self.difficulties)
        return np.full(n, 1.0 / n)

    def sample(self, k: int) -> list[int]:
        """Draw ``k`` distinct task indices (all of them, shuffled, when ``k`` >= the pool size)."""
        n = len(self.difficulties)
        p = self.probabilities()
        size = min(int(k), n)
        return [int(i) for i in self._rng.choice(n, size=size, replace=False, p=p)]

    def _observe(self, outcomes: Iterable[GroupOutcome]) -> tuple[list[GroupOutcome], float, float]:
        groups = list(outcomes)
        n = len(self.difficulties)
        for g in groups:
            if not 0 <= g.index < n:
                raise ConfigError(f"outcome for task index {g.index}, but the pool has {n} tasks")
        self.step += 1
        rewards = [r for g in groups for r in g.rewards]
        pass_rate = float(np.mean(rewards)) if rewards else 0.0
        if rewards:
            self._window.append(pass_rate)
        zv = [g for g in groups if g.zero_variance]
        for g in groups:
            self.times_observed[g.index] += 1
            self.last_observed[g.index] = self.step
        for g in zv:
            self.zero_variance_groups[g.index] += 1
        return groups, pass_rate, (len(zv) / len(groups) if groups else 0.0)

    def update(self, outcomes: Iterable[GroupOutcome]) -> SamplerStats:
        _, pass_rate, zvf = self._observe(outcomes)
        return SamplerStats(self.step, pass_rate, self.rolling_pass_rate, self.target, zvf)

    # --- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION, "kind": self.kind, "n": len(self.difficulties), "seed": self.seed,
            "step": self.step, "window": list(self._window), "window_size": self._window.maxlen,
            "difficulties": self.difficulties.tolist(),
            "times_observed": self.times_observed.tolist(),
            "zero_variance_groups": self.zero_variance_groups.tolist(),
            "last_observed": self.last_observed.tolist(),
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != self.kind or int(state.get("n", -1)) != len(self.difficulties):
            raise ConfigError(f"sampler state is for a {state.get('kind')} sampler over {state.get('n')} tasks; "
                              f"this is a {self.kind} sampler over {len(self.difficulties)} tasks "
                              "(resume with the same dataset and sampler, or start without --resume)")
        self.step = int(state["step"])
        self._window = deque((float(x) for x in state["window"]), maxlen=int(state["window_size"]))
        self.times_observed = np.asarray(state["times_observed"], dtype=np.int64)
        self.zero_variance_groups = np.asarray(state["zero_variance_groups"], dtype=np.int64)
        self.last_observed = np.asarray(state["last_observed"], dtype=np.int64)
        self._rng.bit_generator.state = state["rng"]

    def save(self, path: str | Path) -> None:
        """Write ``state_dict()`` as JSON, atomically (temporary file, then rename)."""
        write_atomic(path, json.dumps(self.state_dict()))

    def load(self, path: str | Path) -> None:
        self.load_state_dict(json.loads(Path(path).read_text()))


class UniformSampler(_SamplerBase):
    """Every task equally likely: the baseline the curriculum is measured against."""

    kind = "uniform"


class CurriculumSampler(_SamplerBase):
    """Beta-belief learnability sampling around an AdaRFT moving target, with PLR staleness (module doc)."""

    kind = "curriculum"

    def __init__(self, difficulties: Sequence[float], *, seed: int = 0, batch_size: int = 1,
                 num_samples: int | None = None, config: CurriculumConfig | None = None) -> None:
        self.config = config or CurriculumConfig()
        super().__init__(difficulties, seed=seed, batch_size=batch_size, num_samples=num_samples,
                         window=self.config.window)
        n = len(self.difficulties)
        self.successes = np.zeros(n, dtype=np.float64)  # decayed evidence
        self.failures = np.zeros(n, dtype=np.float64)
        self.evidence_step = np.zeros(n, dtype=np.int64)  # step the evidence was last decayed to
        init = self.config.initial_target
        self._target = float(np.quantile(self.difficulties, self.config.initial_quantile)) if init is None \
            else float(init)
        self._lo, self._hi = float(self.difficulties.min()), float(self.difficulties.max())
        self._residuals: deque[float] = deque(maxlen=self.config.window)  # observed - predicted pass rate

    @property
    def target(self) -> float:
        return self._target

    def adopt_pool(self, difficulties: Sequence[float]) -> None:
        self.successes, self.failures = np.zeros(0), np.zeros(0)
        self.evidence_step = np.zeros(0, dtype=np.int64)
        super().adopt_pool(difficulties)

    def _grow_counters(self) -> None:
        super()._grow_counters()
        k = len(self.difficulties) - len(self.successes)
        self.successes = np.concatenate([self.successes, np.zeros(k)])
        self.failures = np.concatenate([self.failures, np.zeros(k)])
        self.evidence_step = np.concatenate([self.evidence_step, np.full(k, self.step, dtype=np.int64)])
        self._lo, self._hi = float(self.difficulties.min()), float(self.difficulties.max())

    def _decay(self) -> np.ndarray:
        age = (self.step - self.evidence_step).astype(np.float64)
        return np.power(0.5, age / self.config.evidence_half_life)

    def prior_mean(self) -> np.ndarray:
        c = self.config
        logit_beta = math.log(c.target_pass_rate / (1.0 - c.target_pass_rate))
        return _sigmoid(logit_beta + c.prior_slope * (self._target - self.difficulties))

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Beta parameters (a, b) of every task's current pass-rate belief."""
        k = self.config.prior_strength
        p0 = self.prior_mean()
        decay = self._decay()
        return k * p0 + decay * self.successes, k * (1.0 - p0) + decay * self.failures

    def pass_rate_belief(self) -> np.ndarray:
        a, b = self.posterior()
        return a / (a + b)

    def learnability(self) -> np.ndarray:
        p = self.pass_rate_belief()
        return p * (1.0 - p)

    def staleness(self) -> np.ndarray:
        return (self.step - self.last_observed).astype(np.float64)

    def probabilities(self) -> np.ndarray:
        c = self.config
        score = np.power(self.learnability() + 1e-6, 1.0 / c.temperature)
        p_score = score / score.sum()
        stale = self.staleness()
        p_stale = stale / stale.sum() if stale.sum() > 0 else np.full_like(stale, 1.0 / len(stale))
        p = (1.0 - c.staleness_mix) * p_score + c.staleness_mix * p_stale
        return p / p.sum()

    def update(self, outcomes: Iterable[GroupOutcome]) -> SamplerStats:
        groups = list(outcomes)
        # What the prior at the current target predicted for these tasks (before the target moves).
        p0 = self.prior_mean()
        expected = [float(p0[g.index]) for g in groups for _ in g.rewards if 0 <= g.index < len(p0)]
        groups, pass_rate, zvf = self._observe(groups)
        decay = self._decay()
        for g in groups:
            i = g.index
            s = g.successes
            self.successes[i] = decay[i] * self.successes[i] + s
            self.failures[i] = decay[i] * self.failures[i] + (len(g.rewards) - s)
            self.evidence_step[i] = self.step
        if expected:
            self._residuals.append(pass_rate - float(np.mean(expected)))
            c = self.config
            move = c.target_step * math.tanh(c.target_sensitivity * float(np.mean(self._residuals)))
            self._target = float(min(self._hi, max(self._lo, self._target + move)))
        return SamplerStats(self.step, pass_rate, self.rolling_pass_rate, self._target, zvf)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update({"config": self.config.to_dict(), "target": self._target, "residuals": list(self._residuals),
                      "successes": self.successes.tolist(), "failures": self.failures.tolist(),
                      "evidence_step": self.evidence_step.tolist()})
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.config = CurriculumConfig.from_dict(state["config"])
        self._target = float(state["target"])
        self._residuals = deque((float(x) for x in state["residuals"]), maxlen=self.config.window)
        self.successes = np.asarray(state["successes"], dtype=np.float64)
        self.failures = np.asarray(state["failures"], dtype=np.float64)
        self.evidence_step = np.asarray(state["evidence_step"], dtype=np.int64)
        self._lo, self._hi = float(self.difficulties.min()), float(self.difficulties.max())


SAMPLERS = {"curriculum": CurriculumSampler, "uniform": UniformSampler}


def make_sampler(kind: str, difficulties: Sequence[float], **kwargs: Any) -> CurriculumSampler | UniformSampler:
    """Build a sampler by name (``curriculum`` | ``uniform``)."""
    cls = SAMPLERS.get(kind)
    if cls is None:
        raise ConfigError(f"unknown sampler {kind!r}; known: {sorted(SAMPLERS)}")
    return cls(difficulties, **kwargs)
