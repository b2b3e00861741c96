"""The RL loop: sample tasks, roll out G patches each, grade them, update the sampler and the policy.

Algorithm (one step; group-relative RL as in GRPO, Shao et al. 2024):

    indices  = sampler.sample(batch_size)                  # curriculum or uniform
    patches  = policy.propose(task, group_size) per task   # G rollouts per task
    rewards  = grader.grade(all (task, patch) pairs)       # one parallel call: the reward path
    sampler.update(per-task rewards)                       # beliefs, target difficulty, staleness
    metrics  = policy.update(graded groups)                # the learning hook (GRPO in hf/simulated)
    log one JSON line; save sampler + policy + step        # resumable after any step

Deviations and options:
* The policy's optimiser lives in the policy (``policy.update``); the loop is the same for an LLM, an
  external agent (whose ``update`` only reports) and the simulated learner.
* ``filter_zero_variance=True`` is DAPO's dynamic sampling (Yu et al. 2025): groups whose G rewards are
  all equal are dropped before the policy update and more batches are drawn, up to ``max_gen_batches``
  per step, until ``batch_size`` informative groups are kept. The sampler still learns from every group.
  Such a step costs more rollouts; ``rollouts`` in the metrics counts them.
* Grading is synchronous per step (no overlap of rollout and grading), which keeps runs reproducible.
* ``replenisher`` (``taskforge.rl.replenish``): after each step, tasks generated in the background join
  the pool and the sampler, and harder ones are asked for when the frontier runs thin. ``calibrate``
  (``taskforge.rl.calibrate``): every graded group is recorded and, at the end, per-task difficulties
  are fitted (Rasch) and written back to the dataset directory. A dataset's calibrated difficulties
  are preferred over static scores by the default sampler.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from taskforge.core.errors import ConfigError, DatasetError
from taskforge.core.files import write_atomic
from taskforge.core.task import Task
from taskforge.rl.calibrate import RecordingSampler, write_fit
from taskforge.rl.curriculum import CurriculumSampler, GroupOutcome, TaskSampler
from taskforge.rl.grading import GradedGroup, Grader
from taskforge.rl.policies import Policy
from taskforge.rl.replenish import Replenisher, restore_pool

STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class StepMetrics:
    """One line of the training log."""

    step: int
    pass_rate: float  # mean reward over every rollout graded in this step
    difficulty_mean: float  # static difficulty score of the sampled tasks
    difficulty_std: float
    target: float | None  # curriculum target difficulty after the update
    zero_variance_fraction: float  # share of groups whose G rewards were all equal
    grading_seconds: float
    step_seconds: float
    rollouts: int  # patches graded in this step
    gen_batches: int = 1  # sampled batches (more than one only with zero-variance filtering)
    kept_groups: int = 0  # groups handed to policy.update
    loss: float | None = None
    policy: dict[str, float] = field(default_factory=dict)  # whatever policy.update reported
    flags: dict[str, int] = field(default_factory=dict)  # grading flags (tampering, timeout, ...) -> count
    monitor: dict[str, int] = field(default_factory=dict)  # patch-monitor rule -> findings in this step's rollouts
    # agentic policies (openai, command with sessions): why episodes ended, the trajectory monitor's findings per
    # rule, and every episode's record (taskforge.agent.episode.EpisodeRecord.to_dict, reward filled in)
    episode_end: dict[str, int] = field(default_factory=dict)
    trajectory_monitor: dict[str, int] = field(default_factory=dict)
    episodes: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TrainResult:
    steps: int  # steps completed in total (a resumed run counts the earlier ones)
    history: tuple[StepMetrics, ...]  # the steps run by this call
    rollouts: int  # rollouts graded by this call
    calibrated: int = 0  # tasks whose fitted difficulty this call wrote back (``calibrate=True``)
    added_tasks: int = 0  # tasks on-demand generation added to the pool in this call

    @property
    def last(self) -> StepMetrics | None:
        return self.history[-1] if self.history else None

    def to_dict(self) -> dict[str, Any]:
        last = self.last
        return {"steps": self.steps, "loss": last.loss if last else None,
                "pass_rate": last.pass_rate if last else None,
                "mean_pass_rate": statistics.fmean(m.pass_rate for m in self.history) if self.history else None,
                "target": last.target if last else None, "rollouts": self.rollouts,
                "steps_this_run": len(self.history), "calibrated": self.calibrated,
                "added_tasks": self.added_tasks}


def load_tasks(dataset: str | Path) -> list[Task]:
    """Every task of a dataset directory (``taskforge.dataset``), in the dataset's order."""
    from taskforge.dataset import load_tasks as read_dataset

    tasks = read_dataset(Path(dataset))
    if not tasks:
        raise DatasetError(f"dataset {dataset} has no tasks; generate some with `taskforge generate`")
    return tasks


def _rollout(indices: Sequence[int], tasks: Sequence[Task], policy: Policy, grader: Grader,
             group_size: int) -> tuple[list[GradedGroup], float]:
    proposals = []
    for i in indices:
        patches = policy.propose(tasks[i], group_size)
        if len(patches) != group_size:
            raise ConfigError(f"policy {policy.name!r} returned {len(patches)} patches for "
                              f"{tasks[i].instance_id}, expected {group_size}")
        proposals.append((i, tasks[i], tuple(patches)))
    pairs = [(task, p) for _, task, patches in proposals for p in patches]
    t0 = time.perf_counter()
    grades = grader.grade(pairs)
    seconds = time.perf_counter() - t0
    if len(grades) != len(pairs):
        raise ConfigError(f"grader returned {len(grades)} grades for {len(pairs)} patches")
    groups = [GradedGroup(i, task, patches, tuple(grades[k * group_size:(k + 1) * group_size]))
              for k, (i, task, patches) in enumerate(proposals)]
    return groups, seconds


def run_step(step: int, tasks: Sequence[Task], policy: Policy, grader: Grader, sampler: TaskSampler, *,
             group_size: int, batch_size: int, filter_zero_variance: bool = False,
             max_gen_batches: int = 4) -> StepMetrics:
    """One step of the loop (module doc); returns its metrics."""
    t0 = time.perf_counter()
    seen: list[GradedGroup] = []
    kept: list[GradedGroup] = []
    grading_s, gen = 0.0, 0
    while True:
        gen += 1
        groups, secs = _rollout(sampler.sample(batch_size), tasks, policy, grader, group_size)
        grading_s += secs
        seen += groups
        kept += [g for g in groups if not (filter_zero_variance and g.zero_variance)]
        if not filter_zero_variance or len(kept) >= batch_size or gen >= max_gen_batches:
            break
    kept = kept[:batch_size]
    stats = sampler.update([GroupOutcome(g.index, g.rewards) for g in seen])
    report = policy.update(kept) if kept else {}
    episodes = _episode_records(policy, seen, step)
    diffs = [g.task.difficulty.score for g in seen]
    flags = Counter(str(f) for g in seen for grade in g.grades for f in grade.flags)
    monitor = Counter(rule for g in seen for grade in g.grades for rule in grade.monitor)
    return StepMetrics(
        step=step, pass_rate=statistics.fmean(r for g in seen for r in g.rewards),
        difficulty_mean=statistics.fmean(diffs), difficulty_std=statistics.pstdev(diffs),
        target=stats.target, zero_variance_fraction=stats.zero_variance_fraction,
        grading_seconds=grading_s, step_seconds=time.perf_counter() - t0,
        rollouts=sum(len(g.patches) for g in seen), gen_batches=gen, kept_groups=len(kept),
        loss=report.get("loss"), policy={k: float(v) for k, v in report.items()}, flags=dict(sorted(flags.items())),
        monitor=dict(sorted(monitor.items())),
        episode_end=dict(sorted(Counter(e["end_reason"] for e in episodes).items())),
        trajectory_monitor=dict(sorted(Counter(f["rule"] for e in episodes for f in e["findings"]).items())),
        episodes=tuple(episodes))


def _episode_records(policy: Policy, seen: Sequence[GradedGroup], step: int) -> list[dict[str, Any]]:
    """The episode records an agentic policy kept for this step's rollouts (in rollout order), rewards added."""
    drain = getattr(policy, "drain_episodes", None)
    records = [r.to_dict() for r in drain()] if drain is not None else []
    rewards = [r for g in seen for r in g.rewards]
    for k, rec in enumerate(records):
        rec["step"] = step
        if len(records) == len(rewards):
            rec["reward"] = rewards[k]
    return records


def _truncate_log(log_path: Path, upto_step: int) -> None:
    """Keep the log lines of steps <= ``upto_step`` (a crash may have logged a step it did not save)."""
    if not log_path.exists():
        return
    keep = [line for line in log_path.read_text().splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= upto_step]
    write_atomic(log_path, "".join(line + "\n" for line in keep))


class _LiveView:
    """A rich live table of the latest step (stderr), or nothing."""

    def __init__(self, total: int, console: Console | None, enabled: bool) -> None:
        self.total = total
        self.live = Live(console=console or Console(stderr=True), auto_refresh=False) if enabled else None

    def __enter__(self) -> _LiveView:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.__exit__(None, None, None)

    def show(self, m: StepMetrics) -> None:
        if not self.live:
            return
        t = Table(title=f"taskforge train: step {m.step}/{self.total}", show_header=True)
        for col in ("pass rate", "target", "difficulty", "zero-var", "grading s", "loss"):
            t.add_column(col, justify="right")
        t.add_row(f"{m.pass_rate:.3f}", "-" if m.target is None else f"{m.target:.3f}",
                  f"{m.difficulty_mean:.3f} ± {m.difficulty_std:.3f}", f"{m.zero_variance_fraction:.2f}",
                  f"{m.grading_seconds:.2f}", "-" if m.loss is None else f"{m.loss:.4f}")
        self.live.update(t, refresh=True)


def train(dataset: str | Path | Sequence[Task], policy: Policy, grader: Grader, *, steps: int,
          group_size: int = 8, batch_size: int = 8, sampler: TaskSampler | None = None,
          log_path: str | Path | None = None, state_path: str | Path | None = None, resume: bool = False,
          seed: int = 0, filter_zero_variance: bool = False, max_gen_batches: int = 4,
          on_step: Callable[[StepMetrics], bool | None] | None = None, live: bool = False,
          console: Console | None = None, replenisher: Replenisher | None = None, calibrate: bool = False,
          calibration_bucket: int = 5, calibrate_to: str | Path | None = None) -> TrainResult:
    """Run the loop until ``steps`` steps are done in total (see the module doc).

    ``dataset`` is a dataset directory or a sequence of tasks. ``sampler`` defaults to a
    ``CurriculumSampler`` over the tasks' difficulty scores. With ``resume`` and an existing
    ``state_path`` the sampler, the policy and the step counter continue from the saved state and
    the log keeps its earlier lines. ``on_step`` may return True to stop early. With ``calibrate`` the
    fitted difficulties go to ``calibrate_to`` (default: ``dataset`` when it is a directory).
    """
    tasks = load_tasks(dataset) if isinstance(dataset, str | Path) else list(dataset)
    if not tasks:
        raise DatasetError("no tasks to train on; pass a dataset directory with tasks")
    if steps < 0 or group_size < 1 or batch_size < 1:
        raise ConfigError(f"steps >= 0, group_size >= 1, batch_size >= 1 expected; "
                          f"got {steps}, {group_size}, {batch_size}")
    if sampler is None:
        sampler = CurriculumSampler.from_tasks(tasks, seed=seed, batch_size=batch_size,
                                               calibration=dataset_calibration(dataset))
    recording = None
    if calibrate:
        sampler = recording = RecordingSampler(sampler, tasks, bucket=calibration_bucket)
    log = Path(log_path) if log_path else None
    state_file = Path(state_path) if state_path else None
    start = 0
    if resume and state_file and state_file.exists():
        state = json.loads(state_file.read_text())
        if state.get("policy", {}).get("name") not in (None, policy.name):
            raise ConfigError(f"state {state_file} was saved by policy {state['policy']['name']!r}, "
                              f"not {policy.name!r}; resume with the same --policy or start fresh")
        grown: list[Task] = []
        if "pool" in state:  # on-demand generation grew the pool: its order, then what came after the save
            tasks[:], grown = restore_pool(tasks, state["pool"])
            sampler.adopt_pool(state["sampler"]["difficulties"])
            tasks.extend(grown)
        sampler.load_state_dict(state["sampler"])
        if grown:
            sampler.add_tasks([t.difficulty.score for t in grown])
        if replenisher is not None and "replenish" in state:
            replenisher.load_state_dict(state["replenish"])
        policy.load_state_dict(state["policy"])
        start = int(state["step"])
        if log:
            _truncate_log(log, start)
    elif log and log.exists():
        log.unlink()
    if log:
        log.parent.mkdir(parents=True, exist_ok=True)
    history: list[StepMetrics] = []
    added = 0
    with _LiveView(steps, console, live) as view:
        for step in range(start + 1, steps + 1):
            m = run_step(step, tasks, policy, grader, sampler, group_size=group_size, batch_size=batch_size,
                         filter_zero_variance=filter_zero_variance, max_gen_batches=max_gen_batches)
            history.append(m)
            if replenisher is not None:
                added += len(replenisher.after_step(step, tasks, sampler))
            if log:
                with log.open("a") as fh:
                    fh.write(json.dumps(m.to_dict()) + "\n")
            if state_file:
                state_file.parent.mkdir(parents=True, exist_ok=True)
                saved = {"version": STATE_VERSION, "step": step, "sampler": sampler.state_dict(),
                         "policy": policy.state_dict()}
                if replenisher is not None:
                    saved.update(pool=[t.instance_id for t in tasks], replenish=replenisher.state_dict())
                write_atomic(state_file, json.dumps(saved))
            view.show(m)
            if on_step is not None and on_step(m):
                break
    done = history[-1].step if history else start
    calibrated = 0
    target_dir = calibrate_to if calibrate_to is not None else dataset if isinstance(dataset, str | Path) else None
    if recording is not None and len(recording.recorder) and target_dir is not None:
        calibrated = write_fit(target_dir, recording.fit(), f"train:{policy.name}")
    return TrainResult(done, tuple(history), sum(m.rollouts for m in history), calibrated, added)


def dataset_calibration(dataset: str | Path | Sequence[Task]) -> dict[str, float] | None:
    """Instance id -> calibrated difficulty of a dataset directory (None for tasks given in memory)."""
    if not isinstance(dataset, str | Path):
        return None
    from taskforge.dataset import Dataset

    return {k: c.difficulty for k, c in Dataset.open(dataset, verify=False).calibration().items()} or None
