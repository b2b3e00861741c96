"""``compose``: k validated tasks of one repository -> one harder task, validated as a task of its own.

For each repository of a dataset, the parts are its validated ``delete``, ``module`` and ``feature``
tasks (stubs never: see ``generators.strategy_compose``). Groups of ``k`` parts that delete disjoint
entities are proposed in a seeded, deterministic order; each becomes the candidate
``compose:<part id>+...`` whose covering tests are the union of the parts' FAIL_TO_PASS, and goes
through ``taskforge.validate.steps.validate_candidate``: the very contract every task passes (PASS_TO_PASS
is what stays green with every part gone). Outcomes are journaled as in ``generate``, so a killed run
resumes; accepted tasks are written to the output dataset with their repository archive.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generators.candidates import Candidate
from generators.strategy_compose import PART_STRATEGIES, compose_id
from taskforge.core.files import write_atomic
from taskforge.core.outcomes import Rejected, RejectReason
from taskforge.core.settings import Settings
from taskforge.core.task import Task
from taskforge.pipeline.executors import Executor
from taskforge.pipeline.generate import (
    Event,
    ProfileJob,
    _journal_path,
    open_journal,
    profile_source,
    select_tasks,
)
from taskforge.validate.steps import CandidateJob, CandidateResult, validate_candidate

MAX_PAIRS_SCANNED = 20000


@dataclass(frozen=True, slots=True)
class ComposeOptions:
    k: int = 2
    max_tasks: int | None = None  # per repository
    max_candidates: int | None = None  # compositions validated per repository; None = 3 x max_tasks (or 30)
    seed: int = 0


@dataclass(frozen=True, slots=True)
class ComposeSummary:
    repo: str
    source: str
    candidates: int = 0
    tasks: int = 0
    funnel: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "source": self.source, "candidates": self.candidates, "tasks": self.tasks,
                "funnel": dict(self.funnel), "seconds": round(self.seconds, 2), "error": self.error}


def part_id(task: Task) -> str:
    """The candidate id a task was validated as (``strategy:target``)."""
    cand = (task.provenance or {}).get("candidate") or {}
    return str(cand.get("candidate_id") or f"{task.strategy}:{task.entities[0]}")


def compositions(tasks: Sequence[Task], k: int, seed: int, limit: int) -> list[Candidate]:
    """Up to ``limit`` groups of ``k`` parts deleting disjoint entities, as compose candidates.

    Order: seeded shuffle of the parts, then combinations in that order, each part in at most
    ``k`` groups so the compositions spread over the repository.
    """
    parts = [t for t in tasks if t.strategy in PART_STRATEGIES and t.fail_to_pass]
    parts.sort(key=lambda t: t.instance_id)
    random.Random(seed).shuffle(parts)
    used: Counter[str] = Counter()
    out: list[Candidate] = []
    seen: set[frozenset[str]] = set()
    for n, combo in enumerate(itertools.combinations(parts, k)):
        if len(out) >= limit or n >= MAX_PAIRS_SCANNED:
            break
        ents = [set(t.entities) for t in combo]
        if sum(len(e) for e in ents) != len(set().union(*ents)):
            continue
        if any(used[t.instance_id] >= k for t in combo):
            continue
        ids = sorted(part_id(t) for t in combo)
        if frozenset(ids) in seen or len(set(ids)) < k:
            continue
        seen.add(frozenset(ids))
        used.update(t.instance_id for t in combo)
        covering = tuple(sorted({n for t in combo for n in t.fail_to_pass}))
        score = sum(t.difficulty.score for t in combo)
        why = f"composition of {k}: " + ", ".join(ids)
        out.append(Candidate(compose_id(ids), "compose", combo[0].entities[0], covering, round(score, 4), why))
    return out


def compose_repo(tasks: Sequence[Task], out: Path, settings: Settings, options: ComposeOptions,
                 executor: Executor, writer: Any, emit: Event, sandbox: Any = None) -> ComposeSummary:
    """Validate the compositions of one repository's tasks and add the accepted ones to ``writer``."""
    from taskforge.dataset.funnel import RunFunnel
    from taskforge.validate.worker import load_profile

    start = time.monotonic()
    first = tasks[0]
    profile = profile_source(ProfileJob(first.source, settings.to_dict(), sandbox=sandbox))
    if profile.error:
        return ComposeSummary(first.repo, first.source, error=profile.error)
    prof = load_profile(profile.profile_dir)
    if prof.snapshot.commit != first.base_commit:
        return ComposeSummary(first.repo, first.source, error=(
            f"the profile of {first.source} is at {prof.snapshot.commit[:12]}, the tasks at {first.base_commit[:12]}; "
            "compose with the work area (--work-dir) that generated them"))
    limit = options.max_candidates or (3 * options.max_tasks if options.max_tasks else 30)
    order = compositions(tasks, options.k, options.seed, limit)
    journal, results = open_journal(out, prof.snapshot.slug, order)
    emit("candidates", {"source": first.source, "total": len(order), "done": len(results)})
    provenance = {"seed": options.seed, "strategies": ["compose"], "k": options.k, "max_tasks": options.max_tasks,
                  "sandbox": settings.sandbox, "validation_repeats": settings.validation_repeats,
                  "baseline_runs": settings.baseline_runs}
    batch = max(2, 2 * settings.jobs)
    while True:
        chosen, final = select_tasks(order, results, options.max_tasks)
        if final:
            break
        todo = [c for c in order if c.candidate_id not in results][:batch]
        jobs = [CandidateJob(profile.profile_dir, c, settings.to_dict(), provenance, "default", sandbox) for c in todo]
        for i, res in executor.map_unordered(validate_candidate, jobs):
            cand = todo[i]
            if isinstance(res, BaseException):
                res = CandidateResult(cand.candidate_id, Rejected(cand.candidate_id, RejectReason.INTERNAL_ERROR,
                                                                  f"{type(res).__name__}: {res}"))
            write_atomic(_journal_path(journal, cand.candidate_id), json.dumps(res.to_dict(), sort_keys=True),
                         durable=True)
            results[cand.candidate_id] = res
            emit("candidate", {"source": first.source, "candidate": cand.candidate_id,
                               "accepted": res.task is not None,
                               "reason": res.rejected.reason.value if res.rejected else ""})
    writer.add_repo_archive(prof.snapshot.name, prof.snapshot.commit, prof.repo_dir)
    for res in chosen:
        assert res.task is not None
        writer.add(res.task)
    rejections = [r.rejected for r in results.values() if r.rejected is not None]
    seconds = time.monotonic() - start
    writer.record_run(RunFunnel.from_outcomes(f"compose:{first.source}@{options.seed}:k{options.k}", first.source,
                                              prof.snapshot.name, len(chosen), rejections, seconds=round(seconds, 2),
                                              extra={"k": options.k, "validated_candidates": len(results)}))
    return ComposeSummary(prof.snapshot.name, first.source, len(order), len(chosen),
                          dict(Counter(r.reason.value for r in rejections)), seconds)


def by_repo(tasks: Iterable[Task]) -> dict[str, list[Task]]:
    groups: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        groups[t.repo].append(t)
    return dict(sorted(groups.items()))


def compose(dataset: Path, out: Path, settings: Settings, options: ComposeOptions, executor: Executor,
            emit: Event | None = None, sandbox: Any = None) -> list[ComposeSummary]:
    """Compositions of every repository of ``dataset`` into the dataset at ``out`` (may be the same folder)."""
    from taskforge.core.errors import ConfigError
    from taskforge.dataset.reader import Dataset
    from taskforge.dataset.writer import DatasetWriter

    if options.k < 2:
        raise ConfigError(f"--k {options.k}: a composition combines at least 2 tasks")
    say: Event = emit or (lambda _e, _d: None)
    groups = by_repo(Dataset.open(Path(dataset)).tasks())
    summaries: list[ComposeSummary] = []
    with DatasetWriter(Path(out)) as writer:
        for tasks in groups.values():
            summaries.append(compose_repo(tasks, Path(out), settings, options, executor, writer, say, sandbox))
    return summaries
