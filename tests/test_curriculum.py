"""Curriculum sampler invariants: determinism, no starvation, moving target, state round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from taskforge.bench.curriculum import synthetic_pool
from taskforge.core.errors import ConfigError
from taskforge.rl.curriculum import (
    CurriculumConfig,
    CurriculumSampler,
    GroupOutcome,
    UniformSampler,
    make_sampler,
)


def _difficulties(n: int = 40) -> list[float]:
    return [i / (n - 1) for i in range(n)]


def _simulate(sampler: CurriculumSampler | UniformSampler, steps: int, skill: float = 3.0, seed: int = 0,
              batch: int = 4, group: int = 8) -> list[list[int]]:
    """Drive a sampler with Bernoulli outcomes p = sigmoid(skill - 10 d); return what it sampled."""
    rng = np.random.default_rng(seed)
    d = sampler.difficulties
    drawn = []
    for _ in range(steps):
        idx = sampler.sample(batch)
        drawn.append(idx)
        p = 1 / (1 + np.exp(-(skill - 10 * d[idx])))
        sampler.update([GroupOutcome(i, tuple(float(x) for x in rng.random(group) < pi))
                        for i, pi in zip(idx, p, strict=True)])
    return drawn


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), steps=st.integers(1, 12))
def test_same_seed_same_samples_after_the_same_updates(seed: int, steps: int) -> None:
    a = CurriculumSampler(_difficulties(), seed=seed)
    b = CurriculumSampler(_difficulties(), seed=seed)
    assert _simulate(a, steps, seed=seed) == _simulate(b, steps, seed=seed)
    assert a.sample(6) == b.sample(6)
    assert a.target == b.target


def test_different_seeds_sample_differently() -> None:
    a = _simulate(CurriculumSampler(_difficulties(), seed=1), 10)
    b = _simulate(CurriculumSampler(_difficulties(), seed=2), 10)
    assert a != b


def test_a_batch_has_distinct_valid_indices() -> None:
    s = CurriculumSampler(_difficulties(10), seed=0)
    batch = s.sample(8)
    assert len(batch) == len(set(batch)) == 8
    assert all(0 <= i < 10 for i in batch)
    assert sorted(s.sample(50)) == list(range(10))  # asking for more than the pool gives the pool


def test_no_task_starves() -> None:
    # Learnability concentrates on a narrow band around skill 3; staleness still reaches everyone.
    s = CurriculumSampler(_difficulties(40), seed=0)
    drawn = _simulate(s, 300, skill=3.0)
    seen = {i for batch in drawn for i in batch}
    assert seen == set(range(40))
    assert s.times_observed.min() >= 1
    # The stalest task always keeps at least staleness_mix / n of the probability mass.
    stalest = int(np.argmax(s.staleness()))
    assert s.probabilities()[stalest] >= s.config.staleness_mix / 40


def test_learnable_tasks_are_preferred() -> None:
    s = CurriculumSampler([0.5, 0.5, 0.5], seed=0, config=CurriculumConfig(staleness_mix=0.0))
    for _ in range(5):
        s.update([GroupOutcome(0, (1.0, 0.0) * 4), GroupOutcome(1, (1.0,) * 8), GroupOutcome(2, (0.0,) * 8)])
    p = s.probabilities()
    assert p[0] > 10 * p[1] and p[0] > 10 * p[2]
    belief = s.pass_rate_belief()
    assert belief[1] > 0.8 and belief[2] < 0.2 and abs(belief[0] - 0.5) < 0.05


def test_target_rises_when_passing_and_falls_when_failing() -> None:
    s = CurriculumSampler(_difficulties(), seed=0)
    start = s.target
    ups = []
    for _ in range(5):
        ups.append(s.update([GroupOutcome(i, (1.0,) * 8) for i in s.sample(4)]).target)
    assert all(b > a for a, b in zip([start, *ups], ups, strict=False))
    high = s.target
    downs = []
    for _ in range(10):
        downs.append(s.update([GroupOutcome(i, (0.0,) * 8) for i in s.sample(4)]).target)
    assert downs[-1] < high
    assert all(b <= a for a, b in zip(downs[2:], downs[3:], strict=False))  # once the window is failing
    for _ in range(100):  # clipped to the pool's range
        s.update([GroupOutcome(0, (0.0,) * 8)])
    assert s.target == pytest.approx(min(_difficulties()))


def test_target_tracks_a_learner_near_the_pass_threshold() -> None:
    # Outcomes p = sigmoid(skill - 10 d): p = 0.5 at d = skill / 10. The target settles nearby.
    s = CurriculumSampler(_difficulties(60), seed=0)
    _simulate(s, 200, skill=6.0, batch=8)
    assert abs(s.target - 0.6) < 0.12
    assert 0.35 < s.rolling_pass_rate < 0.65


def test_zero_variance_groups_are_counted() -> None:
    s = CurriculumSampler(_difficulties(5), seed=0)
    stats = s.update([GroupOutcome(0, (1.0, 1.0)), GroupOutcome(1, (0.0, 1.0)), GroupOutcome(2, (0.0, 0.0)),
                      GroupOutcome(3, (1.0, 0.0))])
    assert stats.zero_variance_fraction == 0.5
    assert stats.pass_rate == pytest.approx(4 / 8)
    assert s.zero_variance_groups.tolist() == [1, 0, 1, 0, 0]


def test_state_round_trip_through_json(tmp_path) -> None:
    a = CurriculumSampler(_difficulties(), seed=7, config=CurriculumConfig(temperature=0.3))
    _simulate(a, 15)
    path = tmp_path / "sampler.json"
    a.save(path)
    json.loads(path.read_text())  # plain JSON
    b = CurriculumSampler(_difficulties(), seed=999)
    b.load(path)
    assert b.config.temperature == 0.3 and b.step == a.step and b.target == a.target
    np.testing.assert_allclose(b.probabilities(), a.probabilities())
    assert _simulate(a, 5, seed=3) == _simulate(b, 5, seed=3)


def test_state_of_another_pool_is_refused() -> None:
    a = CurriculumSampler(_difficulties(10), seed=0)
    with pytest.raises(ConfigError, match="10 tasks"):
        CurriculumSampler(_difficulties(12), seed=0).load_state_dict(a.state_dict())
    with pytest.raises(ConfigError, match="uniform"):
        UniformSampler(_difficulties(10)).load_state_dict(a.state_dict())


def test_usable_in_a_dataloader_and_updates_between_batches_take_effect() -> None:
    tasks = synthetic_pool(30, seed=0)
    s = CurriculumSampler.from_tasks(tasks, seed=0, batch_size=5, num_samples=20,
                                     config=CurriculumConfig(staleness_mix=0.0))
    loader = DataLoader(list(range(30)), batch_size=5, sampler=s)
    batches = []
    for batch in loader:
        batches.append(batch.tolist())
        # Task 0 is the only learnable one: after this update it must appear in every later batch.
        s.update([GroupOutcome(0, (1.0, 0.0) * 4)] + [GroupOutcome(i, (1.0,) * 8) for i in range(1, 30)])
    assert len(batches) == 4 and all(len(b) == 5 for b in batches)
    assert all(0 in b for b in batches[1:])


def test_uniform_sampler_is_uniform_and_has_no_target() -> None:
    s = make_sampler("uniform", _difficulties(8), seed=0)
    assert s.target is None
    np.testing.assert_allclose(s.probabilities(), np.full(8, 1 / 8))
    counts = np.bincount([i for _ in range(400) for i in s.sample(2)], minlength=8)
    assert counts.min() > 60
    with pytest.raises(ConfigError, match="unknown sampler"):
        make_sampler("fancy", [0.1])


def test_bad_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="target_pass_rate"):
        CurriculumConfig(target_pass_rate=1.5)
    with pytest.raises(ConfigError, match="at least one task"):
        CurriculumSampler([])


def test_target_moves_to_the_frontier_even_when_the_batch_passes_at_the_threshold() -> None:
    # Half of the rollouts pass (R = beta), but on tasks the prior at T = 0.2 thought nearly impossible:
    # the frontier is above T, so T must rise (plain AdaRFT, R - beta = 0, would not move).
    s = CurriculumSampler(_difficulties(), seed=0, config=CurriculumConfig(initial_target=0.2))
    hard = [i for i, d in enumerate(s.difficulties) if d > 0.75][:4]
    for _ in range(3):
        s.update([GroupOutcome(i, (1.0, 0.0) * 4) for i in hard])
    assert s.target > 0.3
    # Tasks passing exactly as predicted leave the target where it is.
    t = CurriculumSampler(_difficulties(), seed=0, config=CurriculumConfig(initial_target=0.5))
    at = [int(np.argmin(np.abs(t.difficulties - 0.5)))]
    p0 = t.prior_mean()[at[0]]
    t.update([GroupOutcome(at[0], (1.0,) * round(p0 * 100) + (0.0,) * (100 - round(p0 * 100)))])
    assert abs(t.target - 0.5) < 0.01


def test_the_pool_grows_while_sampling_and_a_grown_state_resumes() -> None:
    s = CurriculumSampler(_difficulties(10), seed=0)
    _simulate(s, 5)
    s.add_tasks([1.2, 1.3])
    assert len(s.difficulties) == 12 and s.times_observed[10:].tolist() == [0, 0]
    assert s.staleness()[10] > s.staleness()[:10].max() - 1  # never observed: as stale as can be
    _simulate(s, 20, skill=10.0)
    assert s.times_observed[10:].min() >= 1
    state = json.loads(json.dumps(s.state_dict()))
    other = CurriculumSampler(_difficulties(10), seed=5)
    with pytest.raises(ConfigError, match="12 tasks"):
        other.load_state_dict(state)
    other.adopt_pool(state["difficulties"])
    other.load_state_dict(state)
    np.testing.assert_allclose(other.probabilities(), s.probabilities())
    assert _simulate(other, 3, seed=4) == _simulate(s, 3, seed=4)
    with pytest.raises(ConfigError, match="finite"):
        s.add_tasks([float("nan")])
