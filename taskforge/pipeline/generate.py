"""``generate``: sources -> profiles -> candidates -> validated tasks -> dataset, resumable.

Stages run as picklable functions on an ``Executor`` (process pool or Ray):

* ``profile_source(ProfileJob)``: mine + profile one source; cached in the work area by source, so a
  rerun (or another dataset from the same repository) reuses it. One environment per repository.
* ``validate_candidate(CandidateJob)`` (``taskforge.validate.steps``): one candidate -> Task | Rejected.

Resumability: every candidate's outcome is journaled atomically under ``OUT/.journal/<repo>/`` as it
completes; a rerun with the same arguments skips journaled candidates. Tasks reach the dataset as they
are decided (``taskforge/pipeline/task_sink.py``), in a deterministic order (candidate rank order,
interleaved over strategies), so a run killed at any point and started again ends with exactly the
dataset of an uninterrupted run. A stop (SIGTERM, Ctrl-C, ``max_minutes``) keeps every task accepted so
far and still writes the manifest.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generators.candidates import Candidate, costly, interleave, propose
from generators.registry import DEFAULT_STRATEGIES, STRATEGIES
from taskforge.core.errors import ConfigError, TaskforgeError
from taskforge.core.files import write_atomic
from taskforge.core.outcomes import Rejected, RejectReason
from taskforge.core.settings import Settings
from taskforge.pipeline import variants
from taskforge.pipeline.executors import Executor
from taskforge.pipeline.stopping import Deadline, RunStopped, stop_reason
from taskforge.pipeline.task_sink import TaskSink, accepted_so_far
from taskforge.pipeline.variants import Part
from taskforge.validate.steps import CandidateJob, CandidateResult, validate_candidate
from taskforge.validate.worker import load_profile

JOURNAL_DIR = ".journal"

Event = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class GenerateOptions:
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    max_tasks: int | None = None  # per source; None = every valid candidate
    max_candidates: int | None = None  # per source, after ranking; None = all
    seed: int = 0
    rev: str | None = None
    mode: str = "default"  # validation mode: "default" | "naive" (the benchmark's reference)
    max_minutes: float | None = None  # wall-clock cap of the whole run; accepted tasks are kept


@dataclass(frozen=True, slots=True)
class ProfileJob:
    source: str
    settings: dict[str, Any]
    rev: str | None = None
    sandbox: Any = None  # a picklable ``Sandbox`` instead of the one ``settings`` name (tests, fakes)
    pure: bool = False  # the pure-Python variant (``taskforge.pipeline.variants``)


@dataclass(frozen=True, slots=True)
class ProfileOutcome:
    source: str
    profile_dir: str = ""
    error: str = ""
    seconds: float = 0.0
    cached: bool = False


@dataclass(frozen=True, slots=True)
class SourceSummary:
    source: str
    repo: str = ""
    error: str = ""
    candidates: int = 0
    accepted: dict[str, int] = field(default_factory=dict)  # strategy -> tasks written
    funnel: dict[str, int] = field(default_factory=dict)  # reject reason -> count
    seconds: float = 0.0
    profile_seconds: float = 0.0
    test_seconds: float = 0.0  # summed sandbox time of all candidates' validation runs
    suite_seconds: float = 0.0  # wall time of one full-suite run of the repository (baseline median)

    @property
    def tasks(self) -> int:
        return sum(self.accepted.values())

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "repo": self.repo, "error": self.error, "candidates": self.candidates,
                "accepted": dict(self.accepted), "tasks": self.tasks, "funnel": dict(self.funnel),
                "seconds": round(self.seconds, 2), "profile_seconds": round(self.profile_seconds, 2),
                "test_seconds": round(self.test_seconds, 2), "suite_seconds": round(self.suite_seconds, 3)}


@functools.cache
def profile_code_hash() -> str:
    """Hash of the code that decides what a profile holds: a profile built by older code is not reused."""
    import generators
    import sandboxes
    import taskforge.profile
    import taskforge.reward  # the profile grades the original through it (taskforge.profile.harness_check)

    digest = hashlib.sha256()
    roots = [Path(taskforge.profile.__file__).parent, Path(generators.__file__).parent,
             Path(sandboxes.__file__).parent, Path(taskforge.reward.__file__).parent]
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root.parent)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def profile_key(job: ProfileJob) -> str:
    s = job.settings
    backend = job.sandbox.name if job.sandbox is not None else s.get("sandbox")
    ident = json.dumps([job.source, job.rev, s.get("baseline_runs"), s.get("python"), backend,
                        s.get("base_image") if s.get("sandbox") != "local" else "", profile_code_hash(),
                        s.get("grading_check", True), s.get("baseline_more_runs_max_s")]
                       + (["pure"] if job.pure else []), sort_keys=True)
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def profile_source(job: ProfileJob) -> ProfileOutcome:
    """Stage function: build (or reuse) the profile of one source. Never raises for a bad source."""
    from sandboxes.selection import make_sandbox
    from taskforge.profile.build import PROFILE_FILE, Profile, build_profile

    start = time.monotonic()
    settings = Settings.load(job.settings)
    pdir = Path(settings.work_dir) / "profiles" / profile_key(job)
    try:
        if (pdir / PROFILE_FILE).is_file():
            Profile.load(pdir)
            return ProfileOutcome(job.source, str(pdir), seconds=time.monotonic() - start, cached=True)
        sandbox = job.sandbox if job.sandbox is not None else make_sandbox(settings)
        profile = build_profile(job.source, settings, sandbox, rev=job.rev, pure=job.pure)
        profile.save(pdir)
        return ProfileOutcome(job.source, str(pdir), seconds=time.monotonic() - start)
    except TaskforgeError as exc:
        return ProfileOutcome(job.source, error=str(exc), seconds=time.monotonic() - start)


def _journal_path(journal: Path, candidate_id: str) -> Path:
    return journal / (hashlib.sha256(candidate_id.encode()).hexdigest()[:24] + ".json")


def _read_journal(path: Path) -> CandidateResult | None:
    try:
        return CandidateResult.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a torn or foreign file: the candidate is simply validated again


def open_journal(out: Path, slug: str, order: Sequence[Any]) -> tuple[Path, dict[str, CandidateResult]]:
    """The journal folder of one source in ``out`` and the verdicts it already holds for ``order``."""
    journal = out / JOURNAL_DIR / slug
    journal.mkdir(parents=True, exist_ok=True)
    results: dict[str, CandidateResult] = {}
    for cand in order:
        done = _read_journal(_journal_path(journal, cand.candidate_id))
        if done is not None:
            results[cand.candidate_id] = done
    return journal, results


def select_tasks(order: Sequence[Candidate], results: dict[str, CandidateResult],
                 max_tasks: int | None) -> tuple[list[CandidateResult], bool]:
    """The first ``max_tasks`` accepted results in candidate order; True when that choice is final."""
    chosen: list[CandidateResult] = []
    for cand in order:
        res = results.get(cand.candidate_id)
        if res is None:
            return chosen, False
        if res.task is not None:
            chosen.append(res)
            if max_tasks is not None and len(chosen) >= max_tasks:
                return chosen, True
    return chosen, True


def run_source(profile: ProfileOutcome, out: Path, settings: Settings, options: GenerateOptions,
               executor: Executor, writer: Any, emit: Event, sandbox: Any = None,
               deadline: Deadline | None = None, part: Part | None = None) -> SourceSummary:
    """Validate the candidates of one profiled source and add its tasks to ``writer`` as they are decided.

    A stop (``RunStopped``, ``KeyboardInterrupt``) keeps every task accepted so far and re-raises as
    ``SourceStopped`` carrying this source's summary. ``part``: one pass of several over the source
    (``taskforge.pipeline.variants``): the candidates it takes, its share of ``max_tasks``, its journal.
    """
    from generators.registry import all_strategies

    start = time.monotonic()
    prof = load_profile(profile.profile_dir)
    known = all_strategies()
    unknown = [s for s in options.strategies if s not in known]
    if unknown:
        raise ConfigError(f"unknown strategies {unknown}; choose from {sorted(known)}")
    candidates, pre_rejected = propose(prof, [known[s] for s in options.strategies], options.seed)
    order = interleave(candidates, options.strategies, last=costly(candidates, prof.baseline.durations))
    if part is not None:
        order = part.take(order)
        pre_rejected = pre_rejected if part.first else []
        options = dataclasses.replace(options, max_tasks=part.max_tasks)
    if options.max_candidates is not None:
        order = order[: options.max_candidates]
    journal, results = open_journal(out, prof.snapshot.slug + (part.journal_suffix if part else ""), order)
    emit("candidates", {"source": profile.source, "total": len(order), "done": len(results)})

    provenance = {"seed": options.seed, "strategies": list(options.strategies), "max_tasks": options.max_tasks,
                  "sandbox": settings.sandbox, "validation_repeats": settings.validation_repeats,
                  "baseline_runs": settings.baseline_runs}
    batch_size = max(2, 2 * settings.jobs)
    sink = TaskSink(writer, prof.snapshot.name, prof.snapshot.commit, prof.repo_dir)
    try:
        while True:
            chosen, final = select_tasks(order, results, options.max_tasks)
            sink.add(chosen)  # decided tasks reach the dataset now
            if final:
                break
            if deadline is not None:
                deadline.check()
            todo = [c for c in order if c.candidate_id not in results][:batch_size]
            for c, same in [(c, duplicate_of(c, results)) for c in todo]:
                if same:  # its task would be a copy: the dataset drops it, so it is not validated at all
                    dup = CandidateResult(c.candidate_id, Rejected(
                        c.candidate_id, RejectReason.DUPLICATE, f"the accepted {same} stubs exactly {c.entity}"))
                    write_atomic(_journal_path(journal, c.candidate_id), json.dumps(dup.to_dict(), sort_keys=True),
                                 durable=True)
                    results[c.candidate_id] = dup
            todo = [c for c in todo if c.candidate_id not in results]
            if not todo:
                continue
            jobs = [CandidateJob(profile.profile_dir, c, settings.to_dict(), provenance, options.mode, sandbox)
                    for c in todo]
            for i, res in executor.map_unordered(validate_candidate, jobs):
                cand = todo[i]
                if isinstance(res, BaseException):
                    res = CandidateResult(cand.candidate_id, Rejected(
                        cand.candidate_id, RejectReason.INTERNAL_ERROR, f"{type(res).__name__}: {res}"))
                elif res.task is not None and (same := same_task_as(res.task, results)):
                    # validated in the same batch as its twin (arrow: TzinfoParser and TzinfoParser.parse, next to
                    # each other in the order): the writer would drop it, and it must not count as accepted
                    res = dataclasses.replace(res, outcome=Rejected(
                        cand.candidate_id, RejectReason.DUPLICATE,
                        f"the accepted {same} is the same task (entities {list(res.task.entities)})"))
                write_atomic(_journal_path(journal, cand.candidate_id), json.dumps(res.to_dict(), sort_keys=True),
                             durable=True)
                results[cand.candidate_id] = res
                sink.add(select_tasks(order, results, options.max_tasks)[0])
                emit("candidate", {"source": profile.source, "candidate": cand.candidate_id,
                                   "accepted": res.task is not None,
                                   "reason": res.rejected.reason.value if res.rejected else ""})
    except (RunStopped, KeyboardInterrupt) as exc:
        sink.add(accepted_so_far(order, results, options.max_tasks))
        sink.flush()
        summary = _summarize(profile, prof, writer, order, results, sink.written, pre_rejected, options, start,
                             part)
        raise SourceStopped(dataclasses.replace(summary, error=f"stopped by {stop_reason(exc)}: "
                                                f"{summary.tasks} task(s) kept; run the same command again "
                                                "to resume")) from exc
    sink.finish()
    return _summarize(profile, prof, writer, order, results, chosen, pre_rejected, options, start, part)


def duplicate_of(cand: Candidate, results: Mapping[str, CandidateResult]) -> str:
    """The accepted candidate whose task is ``cand``'s (``""``: none): a class stub stubs its methods and
    records them as the task's entities, so the stub of a class with one stubbable method and the stub of that
    method are one task (arrow 1.4.0: ``TzinfoParser`` and ``TzinfoParser.parse``, both validated, one dropped
    by the dataset writer as a duplicate)."""
    for cid, res in results.items():
        task = res.task
        if task is not None and task.strategy == cand.strategy and tuple(task.entities) == (cand.entity,):
            return cid
    return ""


def same_task_as(task: Any, results: Mapping[str, CandidateResult]) -> str:
    """The accepted candidate whose task has ``task``'s strategy and entities (``""``: none)."""
    for cid, res in results.items():
        other = res.task
        if other is not None and other.strategy == task.strategy and tuple(other.entities) == tuple(task.entities):
            return cid
    return ""


class SourceStopped(BaseException):
    """A stop reached ``run_source``: its tasks are in the writer; ``summary`` says what was kept."""

    def __init__(self, summary: SourceSummary) -> None:
        super().__init__(summary.error)
        self.summary = summary


def _summarize(profile: ProfileOutcome, prof: Any, writer: Any, order: Sequence[Candidate],
               results: dict[str, CandidateResult], chosen: Sequence[CandidateResult], pre_rejected: list[Any],
               options: GenerateOptions, start: float, part: Part | None = None) -> SourceSummary:
    """Record the source's funnel in the dataset and return its summary."""
    from taskforge.dataset.funnel import RunFunnel

    considered = [results[c.candidate_id] for c in order if c.candidate_id in results]
    rejections = [r.rejected for r in considered if r.rejected is not None] + pre_rejected
    accepted = Counter(r.task.strategy for r in chosen if r.task is not None)
    test_seconds = sum(r.test_seconds for r in considered)
    stages: Counter[str] = Counter()
    stage_cpu: Counter[str] = Counter()
    for r in considered:
        stages.update(r.stages)
        stage_cpu.update(r.stage_cpu)
    seconds = time.monotonic() - start
    suite = _suite_seconds(prof)
    writer.record_run(RunFunnel.from_outcomes(
        f"{profile.source}@{options.seed}{part.run_suffix if part else ''}", profile.source, prof.snapshot.name,
        len(chosen), rejections,
        seconds=round(seconds + profile.seconds, 2),
        extra={"accepted_by_strategy": dict(accepted), "stage_seconds": {k: round(v, 3) for k, v in stages.items()},
               "stage_cpu_seconds": {k: round(v, 3) for k, v in stage_cpu.items()},
               "sandbox_runs": sum(r.runs for r in considered),
               "profile_seconds": round(profile.seconds, 2), "test_seconds": round(test_seconds, 2),
               "suite_seconds": suite, "validated_candidates": len(considered),
               "accepted_valid": sum(1 for r in considered if r.task is not None)}))
    return SourceSummary(profile.source, prof.snapshot.name, "", len(order) + len(pre_rejected), dict(accepted),
                         dict(Counter(r.reason.value for r in rejections)), seconds, profile.seconds,
                         test_seconds, suite)


def _suite_seconds(prof: Any) -> float:
    runs = list(prof.baseline.run_seconds[1:] or prof.baseline.run_seconds)
    return round(sorted(runs)[len(runs) // 2], 3) if runs else 0.0


def generate(sources: Sequence[str], out: Path, settings: Settings, options: GenerateOptions,
             executor: Executor, emit: Event | None = None, sandbox: Any = None) -> list[SourceSummary]:
    """Run the whole pipeline; one bad source never stops the others (its summary carries the error)."""
    from taskforge.dataset.writer import DatasetWriter

    say: Event = emit or (lambda _e, _d: None)
    out = Path(out)
    unknown = [s for s in options.strategies if s not in STRATEGIES] or ([] if options.strategies else ["(none)"])
    if unknown:
        raise ConfigError(f"unknown strategies {unknown}; available: {', '.join(STRATEGIES)}")
    summaries: list[SourceSummary] = []
    deadline = Deadline.after(options.max_minutes)
    jobs = [ProfileJob(s, settings.to_dict(), options.rev, sandbox) for s in sources]
    say("profiles", {"total": len(jobs)})
    profiles: dict[int, ProfileOutcome] = {}
    try:
        for i, res in executor.map_unordered(profile_source, jobs):
            profiles[i] = res if isinstance(res, ProfileOutcome) else ProfileOutcome(sources[i], error=f"{res}")
            say("profiled", {"source": sources[i], "error": profiles[i].error, "cached": profiles[i].cached})
            deadline.check()
    except (RunStopped, KeyboardInterrupt) as exc:
        why = f"stopped by {stop_reason(exc)} while profiling; run the same command again to resume"
        return [SourceSummary(s, error=why) for s in sources]
    with DatasetWriter(out) as writer:
        for i, source in enumerate(sources):
            prof = profiles[i]
            if prof.error:
                summaries.append(SourceSummary(source, error=prof.error, seconds=prof.seconds))
                continue
            try:
                profile = load_profile(prof.profile_dir)
                for warning in profile_warnings(profile):
                    say("warning", {"source": source, "message": warning})
                if why := harness_refusal(profile.baseline.grading_check):
                    summaries.append(SourceSummary(source, error=why, seconds=prof.seconds))
                    continue
                if variants.may_follow(dict(profile.env.extra), settings.pure_python_variant):
                    first = run_source(prof, out, settings, options, executor, writer, say, sandbox, deadline,
                                       variants.first_part(options.max_tasks))
                    summaries.append(_after_first_part(first, prof, profile, out, settings, options, executor,
                                                       writer, say, sandbox, deadline))
                else:
                    summaries.append(run_source(prof, out, settings, options, executor, writer, say, sandbox,
                                                deadline))
            except TaskforgeError as exc:
                summaries.append(SourceSummary(source, error=str(exc)))
            except SourceStopped as stop:
                summaries.append(stop.summary)
                summaries += [SourceSummary(s, error="not started: the run was stopped") for s in sources[i + 1:]]
                break  # the writer closes normally: manifest + card list every task kept
            say("source_done", {"source": source})
    return summaries


def _after_first_part(summary: SourceSummary, prof: ProfileOutcome, profile: Any, out: Path, settings: Settings,
                      options: GenerateOptions, executor: Executor, writer: Any, say: Event, sandbox: Any,
                      deadline: Deadline | None) -> SourceSummary:
    """The source's pure-Python variant, then its main profile's twins, while tasks are still wanted
    (``taskforge.pipeline.variants``); ``summary``: its first part's."""
    if variants.left(options.max_tasks, summary) != 0:
        pure = _pure_profile(prof, profile, settings, options, executor, say, sandbox, deadline)
        if pure is not None:
            summary = _part(summary, pure, variants.pure_part(profile, variants.left(options.max_tasks, summary)),
                            out, settings, options, executor, writer, say, sandbox, deadline)
    if variants.left(options.max_tasks, summary) != 0:
        summary = _part(summary, prof, variants.twins_part(variants.left(options.max_tasks, summary)),
                        out, settings, options, executor, writer, say, sandbox, deadline)
    return summary


def _part(before: SourceSummary, prof: ProfileOutcome, part: Part, out: Path, settings: Settings,
          options: GenerateOptions, executor: Executor, writer: Any, say: Event, sandbox: Any,
          deadline: Deadline | None) -> SourceSummary:
    try:
        return variants.merged(before, run_source(prof, out, settings, options, executor, writer, say, sandbox,
                                                  deadline, part))
    except SourceStopped as stop:
        raise SourceStopped(variants.merged(before, stop.summary)) from stop


def _pure_profile(prof: ProfileOutcome, profile: Any, settings: Settings, options: GenerateOptions,
                  executor: Executor, say: Event, sandbox: Any, deadline: Deadline | None) -> ProfileOutcome | None:
    """The profile of the source's pure-Python variant (None, with a warning, when it has none)."""
    if deadline is not None:
        deadline.check()
    modules = profile.env.extra["extension_modules"]
    say("variant", {"source": prof.source, "modules": modules,
                    "message": f"profiling {prof.source} again without its compiled modules ({modules}): "
                               "tasks from the fallbacks they hide"})
    job = ProfileJob(prof.source, settings.to_dict(), options.rev, sandbox, pure=True)
    [(_i, res)] = list(executor.map_unordered(profile_source, [job]))
    pure = res if isinstance(res, ProfileOutcome) else ProfileOutcome(prof.source, error=f"{res}")
    try:  # the main run's tasks stand whatever happens to the variant
        why = pure.error or harness_refusal(load_profile(pure.profile_dir).baseline.grading_check)
    except TaskforgeError as exc:
        why = str(exc)
    if why:
        say("warning", {"source": prof.source, "message": f"no pure-Python variant: {why}"})
        return None
    return pure


def harness_refusal(check: Any) -> str:
    """Why no task of this source could hold ('' when some could): the grading harness passed not one of
    the original's reliable tests (its check ran and reported them all red or missing). fastjsonschema 2.22.3:
    an obsolete plugin crashed every grading, and its 177 candidates were validated anyway (2.9 CPU-min,
    71 gold_failed, 0 tasks)."""
    if check is None or check.status != "error" or not check.detail.startswith("no test passed"):
        return ""
    return (f"the grading harness passes none of the {check.graded} reliable tests on the original code, so no "
            f"task could hold (grading check: {check.detail[:200]}); fix the environment or the test "
            "configuration, or set grading_check = false to see every candidate fail")


def profile_warnings(profile: Any) -> list[str]:
    """What the user should know about a profiled source: install fallbacks, from the environment notes."""
    notes = profile.spec.notes
    check = profile.baseline.grading_check  # tests that fail only under the grading harness
    return [n.removeprefix("install: ") for n in notes if n.startswith("install: ")] + \
        ([check.line] if check is not None and check.status != "passed" else [])
