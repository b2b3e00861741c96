"""Everything the report shows, collected once from a dataset directory (and a training log) into values.

    data = ReportData.collect("datasets/out/demo", train_log="run/metrics.jsonl")

Sources: the shards (one ``TaskSummary`` per task: difficulty, test sizes, validation runs, audit,
patches), ``funnel.json`` (one ``RepoSummary`` per repository: candidates, each rejection reason,
accepted, time per stage) and the JSONL log of ``taskforge train`` (one ``TrainStep`` per line).
Figures (``figures.py``) and the page (``html.py``) read only these values.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskforge.core.errors import DatasetError
from taskforge.core.task import Task
from taskforge.dataset.funnel import RunFunnel, read_funnel
from taskforge.dataset.reader import Dataset

STRATEGY_TIERS = {"stub": 0, "delete": 1, "module": 2}  # generators' tiers, for ordering and labels
MAX_TESTS_LISTED = 50  # FAIL_TO_PASS ids carried into the page per task (the count is always exact)


@dataclass(frozen=True, slots=True)
class RepoSummary:
    """One repository over every generation run that mined it."""

    repo: str
    sources: tuple[str, ...]
    candidates: int  # 0 when no funnel was recorded
    accepted: int  # accepted by the runs (the dataset may hold fewer after de-duplication)
    rejected: tuple[tuple[str, int], ...]  # (reason, count), most frequent first
    tasks_by_strategy: tuple[tuple[str, int], ...]  # tasks of this repo in the dataset
    stage_seconds: tuple[tuple[str, float], ...]  # "profile" first, then the pipeline stages
    seconds: float  # wall time of the runs

    @property
    def unaccounted(self) -> int:
        """Candidates neither rejected nor accepted (a run cut short by --max-tasks or killed)."""
        return max(0, self.candidates - self.accepted - sum(c for _, c in self.rejected))

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "sources": list(self.sources), "candidates": self.candidates,
                "accepted": self.accepted, "rejected": dict(self.rejected),
                "tasks_by_strategy": dict(self.tasks_by_strategy), "stage_seconds": dict(self.stage_seconds),
                "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RepoSummary:
        return cls(d["repo"], tuple(d.get("sources", ())), int(d.get("candidates", 0)), int(d.get("accepted", 0)),
                   tuple((k, int(v)) for k, v in d.get("rejected", {}).items()),
                   tuple((k, int(v)) for k, v in d.get("tasks_by_strategy", {}).items()),
                   tuple((k, float(v)) for k, v in d.get("stage_seconds", {}).items()), float(d.get("seconds", 0.0)))


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """What the report shows of one task (the full ``Task`` stays in the dataset)."""

    instance_id: str
    repo: str
    strategy: str
    tier: int
    score: float
    lines_deleted: int
    entities: tuple[str, ...]
    fail_to_pass: int
    pass_to_pass: int
    fail_to_pass_ids: tuple[str, ...]  # the first MAX_TESTS_LISTED
    validation: tuple[tuple[str, float], ...]  # (check, seconds) per validation run
    audit_channels: tuple[str, ...]
    audit_hits: tuple[tuple[str, str, str], ...]  # (channel, path, evidence)
    audit_fingerprints: int
    audit_seconds: float
    problem_statement: str
    patch: str  # gold: the deleted code
    test_patch: str  # the hidden tests

    @property
    def audit_passed(self) -> bool:
        return not self.audit_hits

    @property
    def validation_seconds(self) -> float:
        return sum(s for _, s in self.validation)

    @classmethod
    def of(cls, task: Task) -> TaskSummary:
        return cls(task.instance_id, task.repo, task.strategy, task.difficulty.tier, task.difficulty.score,
                   task.difficulty.lines_deleted, tuple(task.entities), len(task.fail_to_pass),
                   len(task.pass_to_pass), tuple(task.fail_to_pass[:MAX_TESTS_LISTED]),
                   tuple((v.check, v.seconds) for v in task.validation), tuple(task.audit.channels),
                   tuple((h.channel, h.path, h.evidence) for h in task.audit.hits), task.audit.fingerprints,
                   task.audit.seconds, task.problem_statement, task.patch, task.test_patch)

    def to_dict(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "repo": self.repo, "strategy": self.strategy, "tier": self.tier,
                "score": self.score, "lines_deleted": self.lines_deleted, "entities": list(self.entities),
                "fail_to_pass": self.fail_to_pass, "pass_to_pass": self.pass_to_pass,
                "fail_to_pass_ids": list(self.fail_to_pass_ids),
                "validation": [list(v) for v in self.validation], "audit_channels": list(self.audit_channels),
                "audit_hits": [list(h) for h in self.audit_hits], "audit_fingerprints": self.audit_fingerprints,
                "audit_seconds": self.audit_seconds, "problem_statement": self.problem_statement,
                "patch": self.patch, "test_patch": self.test_patch}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TaskSummary:
        return cls(d["instance_id"], d["repo"], d["strategy"], int(d["tier"]), float(d["score"]),
                   int(d["lines_deleted"]), tuple(d["entities"]), int(d["fail_to_pass"]), int(d["pass_to_pass"]),
                   tuple(d.get("fail_to_pass_ids", ())), tuple((c, float(s)) for c, s in d.get("validation", ())),
                   tuple(d.get("audit_channels", ())), tuple((c, p, e) for c, p, e in d.get("audit_hits", ())),
                   int(d.get("audit_fingerprints", 0)), float(d.get("audit_seconds", 0.0)),
                   d.get("problem_statement", ""), d.get("patch", ""), d.get("test_patch", ""))


@dataclass(frozen=True, slots=True)
class TrainStep:
    """One line of a ``taskforge train`` log (``taskforge.rl.loop.StepMetrics``), the fields plotted."""

    step: int
    pass_rate: float
    difficulty_mean: float
    difficulty_std: float
    target: float | None  # the curriculum's target difficulty (None for a uniform sampler)
    zero_variance_fraction: float
    grading_seconds: float
    step_seconds: float
    rollouts: int
    monitor: Mapping[str, int] = field(default_factory=dict)  # patch-monitor rule -> findings this step
    trajectory_monitor: Mapping[str, int] = field(default_factory=dict)  # agentic episodes: rule -> findings
    episode_end: Mapping[str, int] = field(default_factory=dict)  # agentic episodes: end reason -> episodes
    # agentic episodes: each trajectory-monitor finding as (instance id, turn, tool, rule, evidence)
    trajectory_findings: tuple[tuple[str, int, str, str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {f: (dict(v) if isinstance(v := getattr(self, f), Mapping) else v) for f in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainStep:
        target = d.get("target")
        return cls(int(d["step"]), float(d["pass_rate"]), float(d["difficulty_mean"]),
                   float(d.get("difficulty_std", 0.0)), None if target is None else float(target),
                   float(d.get("zero_variance_fraction", 0.0)), float(d.get("grading_seconds", 0.0)),
                   float(d.get("step_seconds", 0.0)), int(d.get("rollouts", 0)),
                   {str(k): int(v) for k, v in (d.get("monitor") or {}).items()},
                   {str(k): int(v) for k, v in (d.get("trajectory_monitor") or {}).items()},
                   {str(k): int(v) for k, v in (d.get("episode_end") or {}).items()},
                   tuple(tuple(f) for f in d["trajectory_findings"]) if "trajectory_findings" in d else tuple(
                       (str(e.get("instance_id", "")), int(f.get("line", 0)), str(f.get("path", "")),
                        str(f.get("rule", "")), str(f.get("evidence", "")))
                       for e in d.get("episodes") or () for f in e.get("findings") or ()))


def read_train_log(path: Path | str) -> tuple[TrainStep, ...]:
    """The steps of a JSONL training log, in step order (a resumed run's repeated steps: the last wins)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"training log {path} does not exist; pass the --log file of `taskforge train` "
                           "(default DATASET/train/metrics.jsonl)")
    steps: dict[int, TrainStep] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            step = TrainStep.from_dict(json.loads(line))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DatasetError(f"{path}:{n} is not a step of a `taskforge train` log ({type(exc).__name__}: "
                               f"{exc}); expected one JSON object per line with step, pass_rate, "
                               "difficulty_mean, ...") from exc
        steps[step.step] = step
    return tuple(steps[k] for k in sorted(steps))


def _repo_summaries(runs: Iterable[RunFunnel], tasks: Iterable[TaskSummary]) -> tuple[RepoSummary, ...]:
    by_repo: dict[str, list[RunFunnel]] = defaultdict(list)
    for run in runs:
        by_repo[run.repo].append(run)
    strategies: dict[str, Counter[str]] = defaultdict(Counter)
    for t in tasks:
        strategies[t.repo][t.strategy] += 1
    out = []
    for repo in sorted(set(by_repo) | set(strategies)):
        repo_runs = sorted(by_repo.get(repo, []), key=lambda r: r.run_id)
        rejected: Counter[str] = Counter()
        stages: dict[str, float] = defaultdict(float)
        for r in repo_runs:
            rejected.update(r.rejected)
            extra = r.extra or {}
            stages["profile"] += float(extra.get("profile_seconds", 0.0))
            for stage, secs in (extra.get("stage_seconds") or {}).items():
                stages[stage] += float(secs)
        order = sorted(strategies[repo].items(), key=lambda kv: (STRATEGY_TIERS.get(kv[0], 99), kv[0]))
        out.append(RepoSummary(
            repo=repo, sources=tuple(dict.fromkeys(r.source for r in repo_runs)),
            candidates=sum(r.candidates for r in repo_runs), accepted=sum(r.accepted for r in repo_runs),
            rejected=tuple(sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))),
            tasks_by_strategy=tuple(order),
            stage_seconds=tuple((k, round(v, 3)) for k, v in stages.items() if v > 0),
            seconds=round(sum(r.seconds for r in repo_runs), 3)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ReportData:
    title: str
    root: str
    taskforge_version: str
    updated_at: str
    duplicates_dropped: int
    repos: tuple[RepoSummary, ...]
    tasks: tuple[TaskSummary, ...]  # in instance-id order
    train: tuple[TrainStep, ...] = ()
    train_log: str = ""  # the log's path as given, "" without one

    @classmethod
    def collect(cls, root: Path | str, train_log: Path | str | None = None, *, verify: bool = True) -> ReportData:
        """Read the dataset at ``root`` (verified against its manifest) and the optional training log."""
        ds = Dataset.open(root, verify=verify)
        tasks = tuple(sorted((TaskSummary.of(t) for t in ds.iter_tasks()), key=lambda t: t.instance_id))
        repos = _repo_summaries(read_funnel(ds.root).values(), tasks)
        train = read_train_log(train_log) if train_log is not None else ()
        names = [r.repo for r in repos]
        title = "taskforge report: " + (", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3
                                                                 else "") if names else "empty dataset")
        m = ds.manifest
        return cls(title, str(ds.root), m.taskforge_version, m.updated_at,
                   int(m.counts.get("duplicates_dropped", 0)), repos, tasks, train,
                   str(train_log) if train_log is not None else "")

    @property
    def strategies(self) -> tuple[str, ...]:
        """Strategies present, in tier order."""
        seen = {t.strategy for t in self.tasks}
        return tuple(sorted(seen, key=lambda s: (STRATEGY_TIERS.get(s, 99), s)))

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "root": self.root, "taskforge_version": self.taskforge_version,
                "updated_at": self.updated_at, "duplicates_dropped": self.duplicates_dropped,
                "repos": [r.to_dict() for r in self.repos], "tasks": [t.to_dict() for t in self.tasks],
                "train": [s.to_dict() for s in self.train], "train_log": self.train_log}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReportData:
        return cls(d["title"], d["root"], d.get("taskforge_version", ""), d.get("updated_at", ""),
                   int(d.get("duplicates_dropped", 0)), tuple(RepoSummary.from_dict(r) for r in d.get("repos", ())),
                   tuple(TaskSummary.from_dict(t) for t in d.get("tasks", ())),
                   tuple(TrainStep.from_dict(s) for s in d.get("train", ())), d.get("train_log", ""))
