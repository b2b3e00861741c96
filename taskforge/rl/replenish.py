"""On-demand generation: when the curriculum runs out of tasks to climb, ask the generator for harder ones.

``Replenisher.after_step`` runs after every step of the loop (``taskforge.rl.loop.train``):

1. it collects what its ``TaskSource`` finished in the background and adds those tasks to the loop's
   pool and to the sampler (``add_tasks``) without a restart, dropping any already in the pool (same
   instance id or content hash); every added task is logged with the reason it was asked for;
2. with no request in flight and ``cooldown`` steps since the last one, it asks for ``batch`` harder
   tasks from the pool's repositories when
   * the **frontier runs thin**: fewer than ``min_frontier`` tasks have a believed pass rate (the
     sampler's ``pass_rate_belief``) inside ``frontier_band`` (0.2-0.8), or
   * the **hardest tier is solved**: the mean belief over the observed tasks of the hardest tier (top
     ``1 - hard_quantile`` by difficulty) rises above ``hard_target``.
   Each request is one *level* harder than the last (larger features, higher k).

The seam is ``TaskSource`` (``submit`` a request, ``poll`` finished ones, never blocking the loop):

* ``PipelineTaskSource``: the real one. A background thread runs ``taskforge.pipeline.generate.generate``
  (profiles are cached, candidates validated on the pipeline's executor, every verdict journaled)
  for each repository of the request into the dataset directory itself, so the new tasks are
  validated by the normal contract, written by ``DatasetWriter`` (resumable, de-duplicated) and
  survive a restart. Harder = the strategies ``harder_strategies()`` (``feature``/``compose`` where
  registered, else ``module``/``delete``) with the level's size settings (``level_settings``).
* ``FakeTaskSource``: deterministic in-memory tasks above the pool's hardest, delivered after a
  latency in steps. For tests and for ``taskforge bench curriculum --scenario exhaustion``.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from taskforge.core.errors import ConfigError
from taskforge.core.task import Task

FRONTIER_THIN = "frontier_thin"
HARD_TIER_SOLVED = "hard_tier_solved"


@dataclass(frozen=True, slots=True)
class ReplenishConfig:
    """When to ask for harder tasks and how many (module doc)."""

    min_frontier: int = 8  # ask when fewer tasks than this have a believed pass rate inside frontier_band
    frontier_band: tuple[float, float] = (0.2, 0.8)
    hard_quantile: float = 0.8  # the hardest tier: difficulty at or above this quantile of the pool
    hard_target: float = 0.5  # ask when the hardest tier's believed pass rate rises above this
    batch: int = 16  # tasks per request
    cooldown: int = 3  # steps from one request to the next
    max_sources: int = 2  # repositories asked per request (the ones whose tasks are solved most)
    max_requests: int | None = None  # None: no limit

    def __post_init__(self) -> None:
        lo, hi = self.frontier_band
        if not 0.0 <= lo < hi <= 1.0 or not 0.0 < self.hard_quantile < 1.0 or not 0.0 < self.hard_target < 1.0:
            raise ConfigError(f"replenish: need 0 <= band low < high <= 1, hard_quantile and hard_target in (0, 1); "
                              f"got band {self.frontier_band}, {self.hard_quantile}, {self.hard_target}")
        if self.batch < 1 or self.cooldown < 0 or self.max_sources < 1:
            raise ConfigError(f"replenish: batch >= 1, cooldown >= 0, max_sources >= 1 expected; "
                              f"got {self.batch}, {self.cooldown}, {self.max_sources}")


@dataclass(frozen=True, slots=True)
class ReplenishRequest:
    """One ask for harder tasks: why, how much harder (level), from which repositories."""

    request_id: int
    step: int
    trigger: str  # FRONTIER_THIN | HARD_TIER_SOLVED
    reason: str  # the numbers behind the trigger, for the log
    level: int  # 1 for the first request, one more for each later one
    count: int
    sources: tuple[str, ...]  # Task.source of the repositories to generate from
    hardest: float  # the pool's hardest difficulty score when asked

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a source produced for a request (possibly nothing, with the error that stopped it)."""

    request: ReplenishRequest
    tasks: tuple[Task, ...] = ()
    error: str = ""


@dataclass(frozen=True, slots=True)
class AddedTask:
    """One task added to the pool while training, and why it was asked for."""

    instance_id: str
    strategy: str
    score: float
    request_id: int
    trigger: str
    reason: str
    requested_step: int
    added_step: int
    level: int

    def to_dict(self) -> dict[str, Any]:
        return {"event": "task_added", **asdict(self)}


class TaskSource(Protocol):
    """Produces harder tasks in the background; ``poll`` never blocks."""

    def submit(self, request: ReplenishRequest, known: frozenset[str]) -> None: ...

    def poll(self) -> list[Delivery]: ...

    def pending(self) -> int: ...

    def close(self) -> None: ...


class Replenisher:
    """The loop side of on-demand generation (module doc); state is JSON for resumable runs."""

    def __init__(self, source: TaskSource, config: ReplenishConfig | None = None,
                 log_path: str | Path | None = None) -> None:
        self.source = source
        self.config = config or ReplenishConfig()
        self.log_path = Path(log_path) if log_path else None
        self.level = 0
        self.requests = 0
        self.last_request_step: int | None = None
        self.added: list[AddedTask] = []

    # -- the per-step hook ------------------------------------------------------------------------
    def after_step(self, step: int, tasks: list[Task], sampler: Any) -> list[AddedTask]:
        """Add finished deliveries to ``tasks`` and ``sampler``; ask for more when a trigger fires."""
        added = []
        for delivery in self.source.poll():
            added += self._add(step, delivery, tasks, sampler)
        if self.source.pending() == 0:
            request = self.decide(step, tasks, sampler)
            if request is not None:
                self.source.submit(request, frozenset(t.instance_id for t in tasks))
                self._log({"event": "requested", **request.to_dict()})
        return added

    def decide(self, step: int, tasks: Sequence[Task], sampler: Any) -> ReplenishRequest | None:
        """The request a trigger calls for now, or None."""
        c = self.config
        if c.max_requests is not None and self.requests >= c.max_requests:
            return None
        if self.last_request_step is not None and step - self.last_request_step < c.cooldown:
            return None
        belief = getattr(sampler, "pass_rate_belief", None)
        if belief is None:
            raise ConfigError("on-demand generation reads the sampler's pass-rate beliefs; "
                              "train with the curriculum sampler (--sampler curriculum)")
        p = np.asarray(belief(), dtype=np.float64)
        d = np.asarray(sampler.difficulties, dtype=np.float64)
        lo, hi = c.frontier_band
        frontier = int(((p >= lo) & (p <= hi)).sum())
        hard = (d >= np.quantile(d, c.hard_quantile)) & (np.asarray(sampler.times_observed) > 0)
        hard_pass = float(p[hard].mean()) if hard.any() else 0.0
        if frontier < c.min_frontier:
            trigger = FRONTIER_THIN
            reason = f"{frontier} tasks believed to pass in [{lo}, {hi}] < {c.min_frontier}"
        elif hard_pass > c.hard_target:
            trigger = HARD_TIER_SOLVED
            reason = f"hardest tier believed pass rate {hard_pass:.3f} > {c.hard_target}"
        else:
            return None
        self.level += 1
        self.requests += 1
        self.last_request_step = step
        return ReplenishRequest(self.requests, step, trigger, reason, self.level, c.batch,
                                _solved_sources(tasks, p, c.max_sources), float(d.max()))

    def _add(self, step: int, delivery: Delivery, tasks: list[Task], sampler: Any) -> list[AddedTask]:
        req = delivery.request
        if delivery.error:
            self._log({"event": "request_failed", "request_id": req.request_id, "error": delivery.error})
        ids = {t.instance_id for t in tasks}
        hashes = {t.content_hash for t in tasks}
        fresh = []
        for t in sorted(delivery.tasks, key=lambda t: t.instance_id):
            if t.instance_id in ids or t.content_hash in hashes:
                continue
            ids.add(t.instance_id)
            hashes.add(t.content_hash)
            fresh.append(t)
        if not fresh:
            self._log({"event": "delivered", "request_id": req.request_id, "tasks": 0, "step": step})
            return []
        tasks.extend(fresh)
        sampler.add_tasks([t.difficulty.score for t in fresh])
        out = [AddedTask(t.instance_id, t.strategy, t.difficulty.score, req.request_id, req.trigger, req.reason,
                         req.step, step, req.level) for t in fresh]
        self.added += out
        for a in out:
            self._log(a.to_dict())
        return out

    def _log(self, record: Mapping[str, Any]) -> None:
        if self.log_path is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as fh:
            fh.write(json.dumps(dict(record), sort_keys=True) + "\n")

    def wait(self, timeout: float) -> None:
        """Block until the source has nothing in flight (tests, and a run's end)."""
        wait = getattr(self.source, "wait", None)
        if wait is not None:
            wait(timeout)

    def close(self) -> None:
        self.source.close()

    def state_dict(self) -> dict[str, Any]:
        return {"level": self.level, "requests": self.requests, "last_request_step": self.last_request_step,
                "added": [a.to_dict() for a in self.added]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.level = int(state.get("level", 0))
        self.requests = int(state.get("requests", 0))
        last = state.get("last_request_step")
        self.last_request_step = None if last is None else int(last)
        self.added = [AddedTask(**{k: v for k, v in a.items() if k != "event"}) for a in state.get("added", ())]


def _solved_sources(tasks: Sequence[Task], belief: np.ndarray, k: int) -> tuple[str, ...]:
    """The ``k`` sources whose tasks the policy is believed to pass most often (harder tasks go there)."""
    by: dict[str, list[float]] = {}
    for t, p in zip(tasks, belief, strict=False):
        by.setdefault(t.source, []).append(float(p))
    ranked = sorted(by, key=lambda s: (-float(np.mean(by[s])), s))
    return tuple(ranked[:k])


def restore_pool(tasks: Sequence[Task], saved_ids: Sequence[str]) -> tuple[list[Task], list[Task]]:
    """A resumed pool in its saved order, plus the tasks the dataset has beyond it (added after the save)."""
    by_id = {t.instance_id: t for t in tasks}
    missing = [i for i in saved_ids if i not in by_id]
    if missing:
        raise ConfigError(f"the saved training state names {len(missing)} tasks the dataset lacks "
                          f"(e.g. {missing[0]}); resume with the same dataset or start without --resume")
    saved = set(saved_ids)
    return [by_id[i] for i in saved_ids], [t for t in tasks if t.instance_id not in saved]


# -- the fake source -----------------------------------------------------------------------------
class FakeTaskSource:
    """Tasks harder than the pool's hardest, made by ``make_task(index, score, repo)``, after ``latency`` polls.

    Request *r* yields ``count`` scores uniform on ``[hardest, hardest + spread]`` (capped at 1.0), seeded
    by ``seed`` and the request id, so a run is reproducible.
    """

    def __init__(self, make_task: Callable[[int, float, str], Task], *, latency: int = 2, spread: float = 0.15,
                 seed: int = 0, repo: str = "generated") -> None:
        self.make_task = make_task
        self.latency = latency
        self.spread = spread
        self.seed = seed
        self.repo = repo
        self._queue: list[tuple[int, ReplenishRequest]] = []
        self._made = 0

    def submit(self, request: ReplenishRequest, known: frozenset[str]) -> None:
        self._queue.append((self.latency, request))

    def poll(self) -> list[Delivery]:
        ready = [r for left, r in self._queue if left <= 0]
        self._queue = [(left - 1, r) for left, r in self._queue if left > 0]
        return [self._make(r) for r in ready]

    def _make(self, r: ReplenishRequest) -> Delivery:
        rng = np.random.Generator(np.random.PCG64([self.seed, r.request_id]))
        top = min(1.0, r.hardest + self.spread)
        scores = rng.uniform(min(r.hardest, top - 1e-3), top, r.count)
        tasks = []
        for s in scores:
            tasks.append(self.make_task(100_000 + self._made, float(s), self.repo))
            self._made += 1
        return Delivery(r, tuple(tasks))

    def pending(self) -> int:
        return len(self._queue)

    def close(self) -> None:
        self._queue.clear()


# -- the real source -------------------------------------------------------------------------------
HARDER = ("feature", "compose")  # registered by the feature/composition strategies when present
FALLBACK = ("module", "delete")


def harder_strategies(registry: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``feature``/``compose`` where ``generators.registry`` has them, else the hardest existing ones."""
    if registry is None:
        from generators.registry import STRATEGIES

        registry = STRATEGIES
    known = registry
    found = tuple(s for s in HARDER if s in known)
    return found or tuple(s for s in FALLBACK if s in known)


def level_settings(level: int) -> dict[str, Any]:
    """Size settings of a request ``level`` (those the installed ``Settings`` knows; others are dropped):
    features of at least ``1 + level`` entities, compositions of ``1 + level`` deletions."""
    from taskforge.core.settings import Settings

    wanted = {"feature_min_entities": 1 + level, "compose_k": 1 + level}
    known = {f.name for f in dataclasses.fields(Settings)}
    return {k: v for k, v in wanted.items() if k in known}


@dataclass
class PipelineTaskSource:
    """Harder tasks from ``taskforge.pipeline.generate`` into ``dataset_dir``, in one background thread.

    ``settings`` is the generation's settings (sandbox, work dir, jobs...); ``executor`` and ``jobs``
    choose the pipeline's executor for the candidates (``make_executor``). ``strategies`` defaults to
    ``harder_strategies()``; ``sizes(level)`` gives the settings overrides of a level.
    """

    dataset_dir: Path
    settings: Any  # taskforge.core.settings.Settings
    strategies: tuple[str, ...] | None = None
    executor: str = "process"
    jobs: int | None = None
    seed: int = 0
    sizes: Callable[[int], Mapping[str, Any]] = level_settings
    sandbox: Any = None  # a picklable Sandbox instead of the settings' one (tests)
    _pool: cf.ThreadPoolExecutor = field(init=False, repr=False)
    _futures: list[tuple[ReplenishRequest, cf.Future[Delivery]]] = field(init=False, repr=False,
                                                                           default_factory=list)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.dataset_dir = Path(self.dataset_dir)
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="taskforge-replenish")

    def submit(self, request: ReplenishRequest, known: frozenset[str]) -> None:
        with self._lock:
            self._futures.append((request, self._pool.submit(self.generate, request, known)))

    def poll(self) -> list[Delivery]:
        with self._lock:
            done = [(r, f) for r, f in self._futures if f.done()]
            self._futures = [(r, f) for r, f in self._futures if not f.done()]
        out = []
        for request, f in done:
            exc = f.exception()  # a bug in generation must not stop training: report it as the delivery's error
            out.append(f.result() if exc is None else Delivery(request, (), f"{type(exc).__name__}: {exc}"))
        return out

    def pending(self) -> int:
        with self._lock:
            return len(self._futures)

    def wait(self, timeout: float) -> None:
        with self._lock:
            futures = [f for _, f in self._futures]
        cf.wait(futures, timeout=timeout)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def generate(self, request: ReplenishRequest, known: frozenset[str]) -> Delivery:
        """Synchronously: generate up to ``request.count`` new tasks per source; the tasks not in ``known``."""
        from taskforge.core.errors import TaskforgeError
        from taskforge.core.settings import Settings
        from taskforge.dataset import Dataset
        from taskforge.pipeline.executors import make_executor
        from taskforge.pipeline.generate import GenerateOptions, generate

        strategies = self.strategies or harder_strategies()
        settings = Settings.load({**self.settings.to_dict(), **self.sizes(request.level)})
        errors = []
        executor = make_executor(self.executor, self.jobs if self.jobs is not None else settings.jobs)
        try:
            for source in request.sources:
                have = sum(1 for t in Dataset.open(self.dataset_dir, verify=False).iter_tasks()
                           if t.source == source and t.strategy in strategies)
                options = GenerateOptions(strategies=strategies, max_tasks=have + request.count, seed=self.seed)
                try:
                    summaries = generate([source], self.dataset_dir, settings, options, executor,
                                         sandbox=self.sandbox)
                except TaskforgeError as exc:
                    errors.append(f"{source}: {exc}")
                    continue
                errors += [f"{s.source}: {s.error}" for s in summaries if s.error]
        finally:
            executor.close()
        new = tuple(t for t in Dataset.open(self.dataset_dir).iter_tasks()
                    if t.instance_id not in known and t.strategy in strategies and t.source in request.sources)
        return Delivery(request, new, "; ".join(errors))
