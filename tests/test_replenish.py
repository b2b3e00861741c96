"""On-demand generation: triggers, reasons, adding to the pool without a restart, resume, the real pipeline."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from taskforge.bench.curriculum import synthetic_pool, synthetic_task
from taskforge.core.errors import ConfigError
from taskforge.core.task import Task
from taskforge.dataset import Dataset, write_tasks
from taskforge.rl.curriculum import CurriculumSampler, GroupOutcome, UniformSampler
from taskforge.rl.grading import FakeGrader
from taskforge.rl.loop import train
from taskforge.rl.policies import PolicyOptions, SimulatedPolicy
from taskforge.rl.replenish import (
    FRONTIER_THIN,
    HARD_TIER_SOLVED,
    Delivery,
    FakeTaskSource,
    ReplenishConfig,
    Replenisher,
    ReplenishRequest,
    harder_strategies,
    level_settings,
    restore_pool,
)


def _solved(sampler: CurriculumSampler, n: int) -> None:
    """Every task of the pool passes every rollout."""
    for _ in range(3):
        sampler.update([GroupOutcome(i, (1.0,) * 8) for i in range(n)])


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_thin_frontier_asks_for_harder_tasks_and_they_join_the_pool_with_their_reason(tmp_path: Path) -> None:
    tasks = synthetic_pool(20, seed=0)
    sampler = CurriculumSampler.from_tasks(tasks, seed=0)
    _solved(sampler, 20)
    log = tmp_path / "replenish.jsonl"
    rep = Replenisher(FakeTaskSource(synthetic_task, latency=1), ReplenishConfig(batch=5, cooldown=2), log)
    hardest = max(t.difficulty.score for t in tasks)
    assert rep.after_step(1, tasks, sampler) == []  # asked; nothing delivered yet
    requested = _events(log)[0]
    assert requested["event"] == "requested" and requested["trigger"] == FRONTIER_THIN
    assert "tasks believed to pass in [0.2, 0.8] < 8" in requested["reason"]
    assert requested["sources"] == ["synthetic:synthetic"] and requested["level"] == 1
    assert rep.after_step(2, tasks, sampler) == []  # latency 1: one more poll
    added = rep.after_step(3, tasks, sampler)
    assert len(added) == 5 and len(tasks) == 25 and len(sampler.difficulties) == 25
    assert all(a.score >= hardest and a.trigger == FRONTIER_THIN and a.requested_step == 1 and a.added_step == 3
               for a in added)
    np.testing.assert_allclose(sampler.difficulties[20:], [t.difficulty.score for t in tasks[20:]])
    logged = [e for e in _events(log) if e["event"] == "task_added"]
    assert [e["instance_id"] for e in logged] == [t.instance_id for t in tasks[20:]]
    assert all(e["reason"] == requested["reason"] for e in logged)
    # While the old tasks keep passing, the target climbs past the old pool's top to the new tasks.
    drawn: list[int] = []
    for _ in range(40):
        batch = sampler.sample(5)
        drawn += batch
        sampler.update([GroupOutcome(i, (1.0,) * 8 if i < 20 else (1.0, 0.0) * 4) for i in batch])
    assert sampler.target > hardest - 0.05
    assert sum(i >= 20 for i in drawn[-50:]) >= 25


def test_the_hardest_tier_solved_triggers_too_and_cooldown_and_limit_hold() -> None:
    tasks = synthetic_pool(40, seed=1)
    sampler = CurriculumSampler.from_tasks(tasks, seed=0)
    d = sampler.difficulties
    hard = [i for i in range(40) if d[i] >= np.quantile(d, 0.8)]
    for _ in range(3):
        sampler.update([GroupOutcome(i, (1.0,) * 8) for i in hard])
    rep = Replenisher(FakeTaskSource(synthetic_task), ReplenishConfig(min_frontier=1, cooldown=5, max_requests=2))
    first = rep.decide(10, tasks, sampler)
    assert first is not None and first.trigger == HARD_TIER_SOLVED and "hardest tier believed pass rate" in first.reason
    assert rep.decide(12, tasks, sampler) is None  # cooldown
    second = rep.decide(15, tasks, sampler)
    assert second is not None and second.level == 2
    assert rep.decide(30, tasks, sampler) is None  # max_requests
    fresh = CurriculumSampler.from_tasks(tasks, seed=0)
    assert Replenisher(FakeTaskSource(synthetic_task), ReplenishConfig(min_frontier=1)).decide(1, tasks, fresh) is None
    with pytest.raises(ConfigError, match="curriculum sampler"):
        Replenisher(FakeTaskSource(synthetic_task)).decide(1, tasks, UniformSampler.from_tasks(tasks))


def test_a_delivery_adds_no_task_twice() -> None:
    tasks = synthetic_pool(4)
    sampler = CurriculumSampler.from_tasks(tasks)

    class Twice(FakeTaskSource):
        def poll(self) -> list[Delivery]:
            req = ReplenishRequest(1, 1, FRONTIER_THIN, "r", 1, 2, (), 0.5)
            dup = tasks[0]
            return [Delivery(req, (dup, synthetic_task(50, 0.9), synthetic_task(50, 0.9)))]

    rep = Replenisher(Twice(synthetic_task), ReplenishConfig(max_requests=0))
    added = rep.after_step(1, tasks, sampler)
    assert [a.instance_id for a in added] == [synthetic_task(50, 0.9).instance_id]
    assert len(tasks) == 5 == len(sampler.difficulties)


def test_bad_config_is_refused() -> None:
    with pytest.raises(ConfigError, match="band"):
        ReplenishConfig(frontier_band=(0.8, 0.2))
    with pytest.raises(ConfigError, match="batch"):
        ReplenishConfig(batch=0)


class _DatasetSource(FakeTaskSource):
    """A fake that writes what it makes into the dataset directory, as the pipeline-backed source does."""

    def __init__(self, root: Path) -> None:
        super().__init__(lambda i, s, repo: synthetic_task(i, s, "synthetic"), latency=0)
        self.root = root

    def poll(self) -> list[Delivery]:
        out = super().poll()
        for d in out:
            write_tasks(self.root, d.tasks)
        return out


def test_training_grows_the_pool_without_restart_and_resumes_with_it(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_tasks(root, synthetic_pool(12, seed=0, shape="easy"))
    opts = PolicyOptions(seed=0, skill=6.0, learning_rate=0.2)
    kw = dict(group_size=4, batch_size=4, state_path=tmp_path / "state.json", log_path=tmp_path / "m.jsonl")
    rep = Replenisher(_DatasetSource(root), ReplenishConfig(batch=4, cooldown=1), tmp_path / "rep.jsonl")
    res = train(root, SimulatedPolicy(opts), FakeGrader(), steps=6, replenisher=rep, **kw)
    assert res.added_tasks >= 4
    state = json.loads((tmp_path / "state.json").read_text())
    assert len(state["pool"]) == 12 + res.added_tasks == len(state["sampler"]["difficulties"])
    assert len(Dataset.open(root)) == 12 + res.added_tasks  # appended to the dataset too
    # Resume: the saved pool order is restored, and the run goes on over the grown pool.
    rep2 = Replenisher(_DatasetSource(root), ReplenishConfig(batch=4, cooldown=1), tmp_path / "rep.jsonl")
    res2 = train(root, SimulatedPolicy(opts), FakeGrader(), steps=9, replenisher=rep2, resume=True, **kw)
    assert res2.steps == 9 and len(res2.history) == 3
    assert rep2.requests >= rep.requests and len(rep2.added) >= len(rep.added)
    again = json.loads((tmp_path / "state.json").read_text())
    assert again["pool"][: len(state["pool"])] == state["pool"]


def test_restore_pool_orders_by_the_saved_ids_and_refuses_missing_ones() -> None:
    tasks = synthetic_pool(5)
    ids = [t.instance_id for t in tasks]
    order, extra = restore_pool(tasks, [ids[3], ids[1], ids[0]])
    assert [t.instance_id for t in order] == [ids[3], ids[1], ids[0]]
    assert [t.instance_id for t in extra] == [ids[2], ids[4]]
    with pytest.raises(ConfigError, match="lacks"):
        restore_pool(tasks, ["nope"])


def test_harder_strategies_and_level_sizes_plug_in_by_name() -> None:
    assert harder_strategies({"stub": "", "delete": "", "module": ""}) == ("module", "delete")
    assert harder_strategies({"delete": "", "feature": "", "compose": ""}) == ("feature", "compose")
    from dataclasses import fields

    from taskforge.core.settings import Settings

    known = {f.name for f in fields(Settings)}
    sizes = level_settings(3)
    assert set(sizes) <= known
    assert all(v == 4 for v in sizes.values())


# -- the real pipeline-backed source --------------------------------------------------------------------
@pytest.mark.realrepo
@pytest.mark.slow
def test_pipeline_source_generates_validates_and_appends_harder_tasks_on_a_real_package(tmp_path: Path) -> None:
    from generated_datasets import generated_dataset

    from taskforge.core.settings import Settings
    from taskforge.rl.replenish import PipelineTaskSource

    base = generated_dataset("inflection==0.5.1", strategies=("stub",), max_tasks=2)
    root = tmp_path / "ds"
    shutil.copytree(base.path, root)
    start = Dataset.open(root).tasks()
    settings = Settings.load({"work_dir": str(base.work_dir), "sandbox": "local", "validation_repeats": 2,
                              "baseline_runs": 3, "jobs": 1})
    source = PipelineTaskSource(root, settings, strategies=("delete",), executor="process", jobs=1)
    rep = Replenisher(source, ReplenishConfig(batch=1, min_frontier=50), tmp_path / "rep.jsonl")
    sampler = CurriculumSampler.from_tasks(start)
    pool: list[Task] = list(start)
    t0 = time.monotonic()
    rep.after_step(1, pool, sampler)  # frontier of 2 tasks < 50: asks, in the background
    assert source.pending() == 1
    rep.wait(240)
    added = rep.after_step(2, pool, sampler)
    rep.close()
    seconds = time.monotonic() - t0
    print(f"replenish on a real package: {seconds:.1f} s")
    assert len(added) == 1, (_events(tmp_path / "rep.jsonl"), seconds)
    new = pool[-1]
    assert new.strategy == "delete" and new.repo == "inflection" and new.source == start[0].source
    assert added[0].trigger == FRONTIER_THIN and len(sampler.difficulties) == 3
    ds = Dataset.open(root)  # appended through the dataset writer: manifest and shards verify
    assert sorted(ds.instance_ids()) == sorted(t.instance_id for t in pool)
    checks = {c.check: c.passed for c in new.validation}  # validated by the normal contract
    assert checks.get("gold_patch") is True and "empty_patch" in checks
    # Asking again for the same size adds no duplicate: the journal and the writer skip what exists.
    again = source.generate(ReplenishRequest(9, 3, FRONTIER_THIN, "again", 1, 0, (new.source,), 1.0),
                            frozenset(t.instance_id for t in pool))
    assert again.tasks == () and len(Dataset.open(root)) == len(pool)
