"""``taskforge bench curriculum``: steps to a target pass rate on the hardest tasks, per sampling strategy.

Three arms train the **simulated** learner (``taskforge.rl.policies.SimulatedPolicy``: an item-response
model trained by one-parameter GRPO; a simulation, not a language model) through the real RL loop with
the same rollout budget:

* ``uniform``: every task equally likely;
* ``dapo``: uniform, plus DAPO's dynamic sampling (zero-variance groups dropped, batches drawn again
  until ``batch_size`` informative groups are kept, at most ``max_gen_batches`` per step);
* ``curriculum``: ``taskforge.rl.curriculum.CurriculumSampler`` with its default configuration;
* ``oracle`` (a reference, not a method): samples by the learner's *true* learnability, which only a
  simulation knows. It shows how close the curriculum gets to the best this learner allows.

The measured quantity is the number of steps until the learner's expected pass rate on the *hardest
tier* (the top ``1 - hard_quantile`` of the pool by static difficulty score) reaches ``target``. A step
is ``batch_size * group_size`` graded rollouts, so a dapo step that drew three batches counts as three
steps (``optimizer_steps_dapo`` reports its optimiser steps separately); every arm gets the same
budget of ``max_steps`` such steps, and an arm that does not get there is counted at the budget
(``reached_*`` says how many seeds got there). The expected pass rate is computed exactly from the
simulation (mean of ``sigmoid(skill - b_i)`` over the tier) rather than estimated from more rollouts.

The learner (defaults of ``PolicyOptions``): skill starts at 0; task *i* has latent difficulty
``10 * score_i - 2 + N(0, 0.5)``, so the easiest tasks start near ``p = 0.9`` and the hardest near
``p = 0.0003``; GRPO step size 0.1 (``--learning-rate``). In this model every sampler's speed is bounded
by how informative its groups are (``sqrt(p (1 - p))`` per group at best), which is why the ``oracle``
reference is reported: it is the ceiling a sampler can reach for this learner and pool.

Pool shapes (``--pool-shape``): ``uniform`` scores, ``easy`` (Beta(1, 3): mostly easy) and ``hard``
(Beta(3, 1): most tasks start too hard for the learner).

**Scenario ``exhaustion``** (``--scenario exhaustion``): the starting pool holds only easy tasks (scores
uniform on ``[0, pool_max]``) and the goal is the expected pass rate on a *beyond* tier the pool never
reaches (``beyond_size`` unseen tasks, scores uniform on ``[beyond_min, 1]``). Arm ``fixed`` trains the
curriculum on the starting pool; arm ``on_demand`` adds ``taskforge.rl.replenish.Replenisher`` with a
``FakeTaskSource`` (a simulated generator: each request yields ``batch`` tasks scored up to 0.15 above
the pool's hardest, delivered ``latency`` steps later). Once the learner outgrows a fixed pool, every
group is all-pass and GRPO learns next to nothing; with on-demand generation the frontier keeps moving.

The pool is a real dataset directory (``--dataset DIR``: its tasks' difficulty scores and gold
patches) or, by default, a synthetic pool: ``pool_size`` tasks with scores uniform on [0, 1] and a
one-function gold patch each. Grading uses ``FakeGrader`` (reward 1 iff the patch is the gold patch):
the simulated policy only ever returns the gold patch or a wrong one, so this gives the same rewards
as the sandbox at a tiny fraction of the cost.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from taskforge.core.environment import EnvSpec
from taskforge.core.task import Difficulty, Task

ARMS = ("uniform", "dapo", "curriculum", "oracle")


@dataclass(frozen=True, slots=True)
class BenchConfig:
    seeds: int = 5
    max_steps: int = 400  # budget per arm, in steps of batch_size * group_size rollouts
    batch_size: int = 8
    group_size: int = 8
    target: float = 0.5  # pass rate to reach on the hardest tier
    hard_quantile: float = 0.8  # the hardest tier: scores at or above this quantile
    pool_size: int = 256  # synthetic pool only
    pool_shape: str = "uniform"  # synthetic pool only: "uniform" scores, or "easy" (Beta(1, 3): mostly easy)
    learning_rate: float = 0.1  # the simulated learner's GRPO step size
    max_gen_batches: int = 8  # dapo only

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ArmRun:
    arm: str
    seed: int
    steps: float  # rollout-equivalent steps to the target (the budget when not reached)
    reached: bool
    optimizer_steps: int
    final_hard_pass_rate: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def synthetic_task(i: int, score: float, repo: str = "synthetic") -> Task:
    """A task with difficulty ``score`` and a one-function gold patch (for benchmarks and tests)."""
    path = f"pkg/feature_{i}.py"
    gold = (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,1 +1,3 @@\n import math\n"
            f"+def feature_{i}(x):\n+    return math.floor(x * {i + 1})\n")
    return Task(
        instance_id=f"{repo}__delete__feature_{i}-{i:08x}", repo=repo, source=f"synthetic:{repo}",
        base_commit="0" * 40, version="0", created_at="2026-11-30T00:00:00Z", strategy="delete",
        entities=(f"pkg.feature_{i}.feature_{i}",), setup_patch="", patch=gold, test_patch="",
        problem_statement=f"Implement `feature_{i}(x)`.", fail_to_pass=(f"tests/test_f.py::test_{i}",),
        pass_to_pass=("tests/test_f.py::test_ok",),
        env_spec=EnvSpec(project_name=repo, python="3.11", install_target="."),
        difficulty=Difficulty(tier=1, lines_deleted=2, statements_deleted=1, entities_deleted=1, complexity=1,
                              fan_in=0, fan_out=1, files_touched=1, fail_to_pass=1, score=float(score)))


POOL_SHAPES = ("uniform", "easy", "hard")


def synthetic_pool(n: int, seed: int = 0, shape: str = "uniform") -> list[Task]:
    """``n`` synthetic tasks (seeded) with difficulty scores uniform on [0, 1] (``uniform``) or drawn from
    Beta(1, 3) (``easy``: most tasks easy, few hard, as when small deletions dominate a dataset)."""
    from taskforge.core.errors import ConfigError

    rng = np.random.Generator(np.random.PCG64(seed))
    if shape == "uniform":
        scores = rng.random(n)
    elif shape == "easy":
        scores = rng.beta(1.0, 3.0, n)
    elif shape == "hard":
        scores = rng.beta(3.0, 1.0, n)
    else:
        raise ConfigError(f"unknown pool shape {shape!r}; known: {', '.join(POOL_SHAPES)}")
    return [synthetic_task(i, float(s)) for i, s in enumerate(scores)]


def run_arm(arm: str, tasks: Sequence[Task], seed: int, cfg: BenchConfig) -> ArmRun:
    """Train the simulated learner under one sampling strategy until the target or the budget."""
    from taskforge.rl.curriculum import CurriculumSampler, UniformSampler
    from taskforge.rl.grading import FakeGrader
    from taskforge.rl.loop import StepMetrics, train
    from taskforge.rl.policies import PolicyOptions, SimulatedPolicy

    policy = SimulatedPolicy(PolicyOptions(seed=seed, learning_rate=cfg.learning_rate))
    scores = np.asarray([t.difficulty.score for t in tasks])
    cut = float(np.quantile(scores, cfg.hard_quantile))
    hard = [t for t in tasks if t.difficulty.score >= cut]
    b_hard = np.asarray([policy.latent_difficulty(t) for t in hard])
    rollout_unit = cfg.batch_size * cfg.group_size
    budget = cfg.max_steps * rollout_unit
    b_all = np.asarray([policy.latent_difficulty(t) for t in tasks])

    class OracleSampler(UniformSampler):
        def probabilities(self) -> np.ndarray:
            p = 1.0 / (1.0 + np.exp(-(policy.skill - b_all)))
            w = np.power(p * (1.0 - p), 8) + 1e-12
            return w / w.sum()

    if arm == "curriculum":
        sampler: UniformSampler | CurriculumSampler = CurriculumSampler.from_tasks(
            tasks, seed=seed, batch_size=cfg.batch_size)
    elif arm == "oracle":
        sampler = OracleSampler.from_tasks(tasks, seed=seed, batch_size=cfg.batch_size)
    else:
        sampler = UniformSampler.from_tasks(tasks, seed=seed, batch_size=cfg.batch_size)
    rollouts = [0]
    reached_at: list[float] = []

    def hard_pass() -> float:
        return float(np.mean(1.0 / (1.0 + np.exp(-(policy.skill - b_hard)))))

    def on_step(m: StepMetrics) -> bool:
        rollouts[0] += m.rollouts
        if hard_pass() >= cfg.target:
            reached_at.append(rollouts[0] / rollout_unit)
            return True
        return rollouts[0] >= budget

    result = train(tasks, policy, FakeGrader(), steps=cfg.max_steps * (cfg.max_gen_batches if arm == "dapo" else 1),
                   group_size=cfg.group_size, batch_size=cfg.batch_size, sampler=sampler, seed=seed,
                   filter_zero_variance=(arm == "dapo"), max_gen_batches=cfg.max_gen_batches, on_step=on_step)
    reached = bool(reached_at)
    return ArmRun(arm, seed, reached_at[0] if reached else float(cfg.max_steps), reached, result.steps, hard_pass())


@dataclass(frozen=True, slots=True)
class ExhaustionConfig:
    seeds: int = 5
    max_steps: int = 300
    batch_size: int = 8
    group_size: int = 8
    target: float = 0.5  # expected pass rate to reach on the beyond tier
    pool_size: int = 128
    pool_max: float = 0.4  # the starting pool's scores: uniform on [0, pool_max]
    beyond_min: float = 0.75  # the beyond tier's scores: uniform on [beyond_min, 1]
    beyond_size: int = 64
    learning_rate: float = 0.1
    latency: int = 2  # steps from a request to its delivery
    request_size: int = 16  # tasks per request

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


EXHAUSTION_ARMS = ("fixed", "on_demand")


def run_exhaustion_arm(arm: str, seed: int, cfg: ExhaustionConfig) -> dict[str, Any]:
    """One arm of the exhaustion scenario (module doc): steps to the beyond-tier target, tasks added."""
    from taskforge.rl.curriculum import CurriculumSampler
    from taskforge.rl.grading import FakeGrader
    from taskforge.rl.loop import StepMetrics, train
    from taskforge.rl.policies import PolicyOptions, SimulatedPolicy
    from taskforge.rl.replenish import FakeTaskSource, ReplenishConfig, Replenisher

    rng = np.random.Generator(np.random.PCG64([seed, 7]))
    pool = [synthetic_task(i, float(x)) for i, x in enumerate(rng.uniform(0.0, cfg.pool_max, cfg.pool_size))]
    beyond = [synthetic_task(i, float(x), repo="beyond")
              for i, x in enumerate(rng.uniform(cfg.beyond_min, 1.0, cfg.beyond_size))]
    policy = SimulatedPolicy(PolicyOptions(seed=seed, learning_rate=cfg.learning_rate))
    b_beyond = np.asarray([policy.latent_difficulty(t) for t in beyond])
    replenisher = None
    if arm == "on_demand":
        replenisher = Replenisher(FakeTaskSource(synthetic_task, latency=cfg.latency, seed=seed),
                                  ReplenishConfig(batch=cfg.request_size))
    elif arm != "fixed":
        raise ValueError(f"unknown exhaustion arm {arm!r}")
    sampler = CurriculumSampler.from_tasks(pool, seed=seed, batch_size=cfg.batch_size)
    reached_at: list[int] = []

    def beyond_pass() -> float:
        return float(np.mean(1.0 / (1.0 + np.exp(-(policy.skill - b_beyond)))))

    def on_step(m: StepMetrics) -> bool:
        if beyond_pass() >= cfg.target:
            reached_at.append(m.step)
            return True
        return False

    result = train(pool, policy, FakeGrader(), steps=cfg.max_steps, group_size=cfg.group_size,
                   batch_size=cfg.batch_size, sampler=sampler, seed=seed, on_step=on_step, replenisher=replenisher)
    return {"arm": arm, "seed": seed, "steps": float(reached_at[0]) if reached_at else float(cfg.max_steps),
            "reached": bool(reached_at), "final_beyond_pass_rate": beyond_pass(), "skill": policy.skill,
            "added_tasks": result.added_tasks, "pool_max_score": float(sampler.difficulties.max()),
            "requests": replenisher.requests if replenisher else 0}


def run_exhaustion(cfg: ExhaustionConfig) -> dict[str, Any]:
    """Both arms on every seed; the summary ``--scenario exhaustion`` prints."""
    runs = [run_exhaustion_arm(arm, seed, cfg) for seed in range(cfg.seeds) for arm in EXHAUSTION_ARMS]
    out: dict[str, Any] = {"scenario": "exhaustion", "seeds": cfg.seeds, "config": cfg.to_dict(), "runs": runs}
    for arm in EXHAUSTION_ARMS:
        mine = [r for r in runs if r["arm"] == arm]
        out[f"steps_{arm}"] = statistics.fmean(r["steps"] for r in mine)
        out[f"steps_{arm}_range"] = [min(r["steps"] for r in mine), max(r["steps"] for r in mine)]
        out[f"reached_{arm}"] = sum(r["reached"] for r in mine)
        out[f"final_beyond_pass_rate_{arm}"] = [round(r["final_beyond_pass_rate"], 4) for r in mine]
    out["added_tasks_on_demand"] = [r["added_tasks"] for r in runs if r["arm"] == "on_demand"]
    return out


def run_benchmark(cfg: BenchConfig, tasks: Sequence[Task] | None = None) -> dict[str, Any]:
    """Every arm on every seed; the summary the CLI prints (``--json``: these keys)."""
    pool = list(tasks) if tasks is not None else None
    runs: list[ArmRun] = []
    for seed in range(cfg.seeds):
        seed_pool = pool if pool is not None else synthetic_pool(cfg.pool_size, seed, cfg.pool_shape)
        runs += [run_arm(arm, seed_pool, seed, cfg) for arm in ARMS]
    by = {arm: [r for r in runs if r.arm == arm] for arm in ARMS}
    mean = {arm: statistics.fmean(r.steps for r in by[arm]) for arm in ARMS}
    ratios = [u.steps / c.steps for u, c in zip(by["uniform"], by["curriculum"], strict=True)]
    # The share of the oracle's speedup the curriculum reaches: (U / C) / (U / O) = O / C, per seed too.
    of_oracle = [o.steps / c.steps for o, c in zip(by["oracle"], by["curriculum"], strict=True)]
    return {
        "oracle_fraction": (mean["uniform"] / mean["curriculum"]) / (mean["uniform"] / mean["oracle"]),
        "oracle_fraction_per_seed": of_oracle,
        "steps_uniform": mean["uniform"], "steps_dapo": mean["dapo"], "steps_curriculum": mean["curriculum"],
        "speedup_vs_uniform": mean["uniform"] / mean["curriculum"],
        "speedup_vs_dapo": mean["dapo"] / mean["curriculum"],
        "steps_oracle": mean["oracle"], "speedup_oracle_vs_uniform": mean["uniform"] / mean["oracle"],
        "speedup_vs_uniform_per_seed": ratios,
        "optimizer_steps_dapo": statistics.fmean(r.optimizer_steps for r in by["dapo"]),
        **{f"reached_{arm}": sum(r.reached for r in by[arm]) for arm in ARMS},
        "seeds": cfg.seeds, "pool": f"synthetic/{cfg.pool_shape}" if pool is None else f"dataset ({len(pool)} tasks)",
        "config": cfg.to_dict(), "runs": [r.to_dict() for r in runs],
    }


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("curriculum")
    def curriculum_cmd(
        seeds: Annotated[int, typer.Option(help="Seeds per arm.")] = 5,
        steps: Annotated[int, typer.Option(help="Budget per arm, in steps of batch-size x group-size rollouts.")] = 400,
        dataset: Annotated[Path | None, typer.Option(help="Dataset directory to take the task pool from "
                                                          "(default: a synthetic pool).")] = None,
        batch_size: Annotated[int, typer.Option(help="Tasks per step.")] = 8,
        group_size: Annotated[int, typer.Option(help="Rollouts per task.")] = 8,
        target: Annotated[float, typer.Option(help="Pass rate to reach on the hardest tier.")] = 0.5,
        pool_size: Annotated[int, typer.Option(help="Tasks in the synthetic pool.")] = 256,
        pool_shape: Annotated[str, typer.Option(help="Synthetic pool: uniform | easy (Beta(1,3) scores) | "
                                                     "hard (Beta(3,1): mostly too hard).")] = "uniform",
        scenario: Annotated[str, typer.Option(help="pools: the sampling arms on one pool; exhaustion: fixed pool "
                                                   "vs on-demand generation of harder tasks.")] = "pools",
        learning_rate: Annotated[float, typer.Option(help="Simulated learner's GRPO step size.")] = 0.1,
        as_json: Annotated[bool, typer.Option("--json", help="Last line: one JSON object.")] = False,
    ) -> None:
        """Simulated learner: steps to a target pass rate on the hardest tier, uniform vs DAPO vs curriculum."""
        from rich.console import Console
        from rich.table import Table

        from taskforge.cli._common import user_errors

        with user_errors():
            from taskforge.core.errors import ConfigError
            from taskforge.rl.loop import load_tasks

            if scenario == "exhaustion":
                _print_exhaustion(run_exhaustion(ExhaustionConfig(
                    seeds=seeds, max_steps=steps, batch_size=batch_size, group_size=group_size, target=target,
                    learning_rate=learning_rate)), as_json)
                return
            if scenario != "pools":
                raise ConfigError(f"unknown scenario {scenario!r}; known: pools, exhaustion")

            tasks = load_tasks(dataset) if dataset else None
            cfg = BenchConfig(seeds=seeds, max_steps=steps, batch_size=batch_size, group_size=group_size,
                              target=target, pool_size=pool_size, pool_shape=pool_shape,
                              learning_rate=learning_rate)
            summary = run_benchmark(cfg, tasks)
        console = Console(stderr=as_json)
        table = Table(title=f"curriculum benchmark ({summary['pool']}, {seeds} seeds, budget {steps} steps)")
        for col in ("arm", "mean steps to target", "reached", "per seed"):
            table.add_column(col)
        for arm in ARMS:
            per_seed = [f"{r['steps']:.0f}" for r in summary["runs"] if r["arm"] == arm]
            table.add_row(arm, f"{summary[f'steps_{arm}']:.1f}", f"{summary[f'reached_{arm}']}/{seeds}",
                          " ".join(per_seed))
        console.print(table)
        console.print(f"speedup vs uniform: {summary['speedup_vs_uniform']:.2f}x, "
                      f"vs dapo: {summary['speedup_vs_dapo']:.2f}x "
                      f"(dapo optimiser steps: {summary['optimizer_steps_dapo']:.1f}); "
                      f"share of the oracle's speedup: {summary['oracle_fraction']:.3f} "
                      f"(per seed {min(summary['oracle_fraction_per_seed']):.3f}-"
                      f"{max(summary['oracle_fraction_per_seed']):.3f})")
        if as_json:
            print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))


def _print_exhaustion(summary: dict[str, Any], as_json: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    cfg = summary["config"]
    console = Console(stderr=as_json)
    table = Table(title=f"exhaustion: pool scores <= {cfg['pool_max']}, target {cfg['target']} on scores >= "
                        f"{cfg['beyond_min']} ({summary['seeds']} seeds, budget {cfg['max_steps']} steps)")
    for col in ("arm", "mean steps to target", "reached", "per seed", "final beyond-tier pass rate"):
        table.add_column(col)
    for arm in EXHAUSTION_ARMS:
        runs = [r for r in summary["runs"] if r["arm"] == arm]
        table.add_row(arm, f"{summary[f'steps_{arm}']:.1f}", f"{summary[f'reached_{arm}']}/{summary['seeds']}",
                      " ".join(f"{r['steps']:.0f}" for r in runs),
                      " ".join(f"{r['final_beyond_pass_rate']:.2f}" for r in runs))
    console.print(table)
    console.print(f"tasks added on demand per seed: {summary['added_tasks_on_demand']}")
    if as_json:
        print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))
