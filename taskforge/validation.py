"""Validate one candidate feature in the sandbox; the result is a ``Task`` or a ``Rejected`` value.

Cheapest checks first, so bad candidates cost little (each step can reject):

1. ``delete``: the strategy's libcst transform; touched files must compile.
2. ``covering``: run only the candidate's covering tests on the broken workspace (tests intact).
   FAIL_TO_PASS = those that now fail. None failing -> ``NO_FAIL_TO_PASS``; nothing reported ->
   ``IMPORT_BROKEN``.
3. ``hide``: remove the FAIL_TO_PASS tests from the workspace (``generators.hidden_tests``).
4. ``affected``: run the PASS_TO_PASS tests the coverage map says can be affected (they executed a line of
   a touched file, or live in a touched test file) -> any failure is ``SUITE_RED_AFTER_DELETION``.
5. ``contract``: through the reward path (``taskforge.reward``) exactly as an agent's patch is graded:
   the empty patch must score 0 with every FAIL_TO_PASS failing and every PASS_TO_PASS passing
   (contract 1 and 3 in one run of the full remaining suite), the gold patch must score 1 (contract 4;
   contract 2 is the baseline's N runs plus this one). Repeats after the first re-run FAIL_TO_PASS and
   the affected PASS_TO_PASS only: the other tests execute no changed line, so the code they run is the
   code the baseline ran N times and the first repeat ran once more.
6. ``audit``: scrub the agent's workspace and search it, its git store and the environment for the
   deleted code (``taskforge.audit``) -> ``LEAK_FOUND``.

``validate_candidate(job)`` is a picklable stage function (process pool or Ray); it never raises.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import tempfile
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generators.candidates import Candidate
from taskforge.outcomes import Rejected, RejectReason
from taskforge.settings import Settings
from taskforge.task import Task, ValidationRun

_COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache")


@dataclass(frozen=True, slots=True)
class CandidateJob:
    profile_dir: str
    candidate: Candidate
    settings: Mapping[str, Any]
    provenance: Mapping[str, Any] = field(default_factory=dict)  # generator parameters, seed, run id


@dataclass(frozen=True, slots=True)
class CandidateResult:
    candidate_id: str
    task: Task | None = None
    rejected: Rejected | None = None
    test_seconds: float = 0.0  # summed wall time of sandbox runs (the CPU cost that matters)
    seconds: float = 0.0
    stages: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from taskforge.dataset.schema import task_to_row

        return {"candidate_id": self.candidate_id,
                "task": task_to_row(self.task) if self.task is not None else None,
                "rejected": self.rejected.to_dict() if self.rejected is not None else None,
                "test_seconds": self.test_seconds, "seconds": self.seconds, "stages": dict(self.stages)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CandidateResult:
        from taskforge.dataset.schema import row_to_task

        return cls(d["candidate_id"], row_to_task(d["task"]) if d.get("task") else None,
                   Rejected.from_dict(d["rejected"]) if d.get("rejected") else None,
                   float(d.get("test_seconds", 0.0)), float(d.get("seconds", 0.0)), dict(d.get("stages", {})))


@functools.lru_cache(maxsize=8)
def load_profile(profile_dir: str) -> Any:
    from taskforge.profile import Profile

    return Profile.load(Path(profile_dir))


@functools.lru_cache(maxsize=4)
def _sandbox(settings_items: tuple[tuple[str, Any], ...]) -> Any:
    from sandboxes.select import make_sandbox

    return make_sandbox(Settings.load(dict(settings_items)))


def sandbox_for(settings: Mapping[str, Any]) -> Any:
    return _sandbox(tuple(sorted((k, v) for k, v in settings.items())))


def validate_candidate(job: CandidateJob) -> CandidateResult:
    """Run the checks of the module docstring; a bug of ours becomes ``INTERNAL_ERROR`` with the trace."""
    start = time.monotonic()
    try:
        return _Validation(job).run()
    except Exception as exc:  # one candidate never aborts a run
        detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        return CandidateResult(job.candidate.candidate_id,
                               rejected=Rejected(job.candidate.candidate_id, RejectReason.INTERNAL_ERROR,
                                                 detail[-2000:], time.monotonic() - start),
                               seconds=time.monotonic() - start)


class _Validation:
    """One candidate's validation; holds the per-candidate state of the steps."""

    def __init__(self, job: CandidateJob) -> None:
        self.job = job
        self.cand = job.candidate
        self.settings = Settings.load(dict(job.settings))
        self.profile = load_profile(job.profile_dir)
        self.sandbox = sandbox_for(job.settings)
        self.env = self._env()
        self.start = time.monotonic()
        self.test_seconds = 0.0
        self.stages: dict[str, float] = {}
        self.runs: list[ValidationRun] = []

    def _env(self) -> Any:
        env = self.profile.env
        if env.backend == self.sandbox.name:
            return env
        return self.sandbox.prepare(env.spec, self.profile.repo_dir)

    # -- helpers --------------------------------------------------------------------------------------
    def reject(self, reason: RejectReason, detail: str = "") -> CandidateResult:
        return CandidateResult(self.cand.candidate_id,
                               rejected=Rejected(self.cand.candidate_id, reason, detail[:2000],
                                                 time.monotonic() - self.start),
                               test_seconds=self.test_seconds, seconds=time.monotonic() - self.start,
                               stages=dict(self.stages))

    def lap(self, stage: str, since: float) -> float:
        now = time.monotonic()
        self.stages[stage] = round(self.stages.get(stage, 0.0) + now - since, 4)
        return now

    def run_tests(self, workspace: Path, tests: tuple[str, ...], check: str, repeat: int) -> Any:
        from sandboxes.protocol import RunRequest

        t = time.monotonic()
        out = self.sandbox.run(self.env, workspace, RunRequest(tests=tests, timeout_s=self.settings.test_timeout_s))
        elapsed = time.monotonic() - t
        self.test_seconds += elapsed
        report = out.report.with_missing(tests)
        passed = report.all_ok(tests)
        self.runs.append(ValidationRun(check, repeat, passed,
                                       {n: report.outcome_of(n).value for n in tests}, round(elapsed, 3)))
        return report

    # -- the checks ------------------------------------------------------------------------------------
    def run(self) -> CandidateResult:
        from generators.hidden_tests import hide_tests
        from generators.protocol import all_strategies
        from generators.static_index import is_test_file

        profile, spec = self.profile, self.profile.spec
        repo = profile.repo_dir
        t = time.monotonic()
        strategy = all_strategies()[self.cand.strategy]
        entity = profile.index.entity(self.cand.entity)
        deletion = strategy.delete(entity, profile.index, repo)
        if isinstance(deletion, Rejected):
            return self.reject(deletion.reason, deletion.detail)
        for path, text in deletion.files_after.items():
            if text is not None and path.endswith(".py"):
                try:
                    compile(text, path, "exec")
                except SyntaxError as exc:
                    return self.reject(RejectReason.TRANSFORM_FAILED, f"{path} does not compile: {exc}")
        t = self.lap("delete", t)

        with tempfile.TemporaryDirectory(prefix="tf-validate-") as tmp:
            ws = Path(tmp, "ws")
            shutil.copytree(repo, ws, ignore=_COPY_IGNORE, symlinks=True)
            _write_files(ws, deletion.files_after)
            covering = self.cand.covering_tests
            report = self.run_tests(ws, covering, "covering_broken", 1)
            t = self.lap("covering", t)
            if not report.results or all(r.outcome.value == "missing" for r in report.results):
                return self.reject(RejectReason.IMPORT_BROKEN,
                                   f"no covering test reported on the broken workspace: {report.output_tail[-500:]}")
            f2p = tuple(n for n in covering if not report.outcome_of(n).ok)
            if not f2p:
                return self.reject(RejectReason.NO_FAIL_TO_PASS,
                                   f"all {len(covering)} covering tests still pass without the feature")

            hidden = hide_tests(ws, f2p, profile.index, deletion.deleted)
            if hidden.unmatched:
                return self.reject(RejectReason.TRANSFORM_FAILED,
                                   f"cannot hide {len(hidden.unmatched)} tests statically, e.g. {hidden.unmatched[0]}")
            _write_files(ws, hidden.files_after)
            p2p = tuple(sorted(n for n in profile.baseline.reliable - set(f2p) if not hidden.hides(n)))
            if not p2p:
                return self.reject(RejectReason.NO_PASS_TO_PASS, "no test is left to pass")
            touched = set(deletion.files_after) | set(hidden.files_after)
            affected = self._affected(p2p, touched)
            t = self.lap("hide", t)
            if affected:
                report = self.run_tests(ws, affected, "affected_p2p_broken", 1)
                t = self.lap("affected", t)
                red = [n for n in affected if not report.outcome_of(n).ok]
                if red:
                    return self.reject(RejectReason.SUITE_RED_AFTER_DELETION,
                                       f"{len(red)} PASS_TO_PASS tests fail without the feature, e.g. {red[0]}")

            original = {**deletion.files_before, **hidden.files_before}
            broken = {**deletion.files_after, **hidden.files_after}
            agent_ws = self._scrubbed_copy(ws, deletion, original, broken)
            task = self._task(deletion, original, broken, f2p, p2p, lambda p: is_test_file(p, spec))
            if isinstance(task, Rejected):
                return self.reject(task.reason, task.detail)
            verdict = self._contract(task, affected, ws)
            t = self.lap("contract", t)
            if verdict is not None:
                return verdict
            audit = self._audit(agent_ws, deletion, task)
            t = self.lap("audit", t)
            if not audit.passed:
                hit = audit.hits[0]
                return self.reject(RejectReason.LEAK_FOUND, f"{hit.channel}:{hit.path}: {hit.evidence}")
        task = dataclasses.replace(task, validation=tuple(self.runs), audit=audit,
                                   provenance={**task.provenance, "stage_seconds": dict(self.stages),
                                               "test_seconds": round(self.test_seconds, 3)})
        return CandidateResult(self.cand.candidate_id, task=task, test_seconds=self.test_seconds,
                               seconds=time.monotonic() - self.start, stages=dict(self.stages))

    def _affected(self, p2p: tuple[str, ...], touched: set[str]) -> tuple[str, ...]:
        cov = self.profile.coverage
        hit: set[str] = set()
        for f in touched:
            hit |= cov.tests_for_lines(f, 1, 10**9)
        in_files = {n for n in p2p if n.split("::", 1)[0] in touched}
        return tuple(sorted((hit | in_files) & set(p2p)))

    def _task(self, deletion: Any, original: Mapping[str, str | None], broken: Mapping[str, str | None],
              f2p: tuple[str, ...], p2p: tuple[str, ...], is_test: Any) -> Task | Rejected:
        from generators.difficulty import difficulty_of
        from generators.problem_statement import write_statement
        from taskforge.patches import task_patches

        import taskforge

        profile = self.profile
        snap = profile.snapshot
        patches = task_patches(original, broken, is_test)
        if not patches.patch.strip() or not patches.test_patch.strip():
            return Rejected(self.cand.candidate_id, RejectReason.TRANSFORM_FAILED,
                            "the deletion produced an empty gold or test patch")
        difficulty = difficulty_of(deletion, len(f2p))
        statement = write_statement(deletion, profile.index, profile.repo_dir, repo=snap.name)
        instance_id = make_instance_id(snap.name, snap.version, deletion.strategy, deletion.target, patches)
        return Task(
            instance_id=instance_id, repo=snap.name, source=snap.source, base_commit=snap.commit,
            version=snap.version, created_at=snap.created_at, strategy=deletion.strategy,
            entities=tuple(deletion.deleted), setup_patch=patches.setup_patch, patch=patches.patch,
            test_patch=patches.test_patch, problem_statement=statement, fail_to_pass=tuple(f2p),
            pass_to_pass=tuple(p2p), env_spec=profile.spec, difficulty=difficulty,
            env_frozen=tuple(profile.env.frozen), image_name=str(profile.env.extra.get("image", "")),
            provenance={"taskforge_version": taskforge.__version__, "generator": deletion.strategy,
                        "candidate": self.cand.to_dict(), **dict(self.job.provenance)},
        )

    def _contract(self, task: Task, affected: tuple[str, ...], ws: Path) -> CandidateResult | None:
        """Empty patch scores 0 (F2P red), gold scores 1 — through the reward path, repeated.

        PASS_TO_PASS tests that are red in the empty-patch run (hidden tests restored: e.g. a test module
        importing the deleted name) are re-run on the broken workspace itself, where they must pass.
        """
        from taskforge.grading import DirectoryTrees
        from taskforge.reward import EnvCache, reward

        trees = DirectoryTrees(self.profile.repo_dir)
        envs = EnvCache()
        for repeat in range(1, max(1, self.settings.validation_repeats) + 1):
            graded = task if repeat == 1 else dataclasses.replace(task, pass_to_pass=affected or task.pass_to_pass[:1])
            for check, patch in (("empty_patch", ""), ("gold_patch", task.patch)):
                t = time.monotonic()
                res = reward(graded, patch, sandbox=self.sandbox, trees=trees, settings=self.settings, envs=envs)
                elapsed = time.monotonic() - t
                self.test_seconds += elapsed
                outcomes = dict(res.outcomes)
                if check == "empty_patch":
                    ok = res.score == 0.0 and res.fraction == 0.0 and not _zeroing(res)
                    red = tuple(n for n in graded.pass_to_pass if outcomes.get(n) not in ("passed", "xfailed"))
                    if ok and red:
                        ok = self.run_tests(ws, red, "p2p_broken", repeat).all_ok(red)
                else:
                    ok = res.score == 1.0
                self.runs.append(ValidationRun(check, repeat, ok, outcomes, round(elapsed, 3)))
                if ok:
                    continue
                if "timeout" in res.flags:
                    return self.reject(RejectReason.TIMEOUT, f"{check} repeat {repeat}: {res.detail}")
                if repeat > 1:
                    return self.reject(RejectReason.UNSTABLE, f"{check} repeat {repeat} disagrees: {res.detail}")
                if check == "gold_patch":
                    return self.reject(RejectReason.GOLD_FAILED, f"gold scored {res.score}: {res.flags} {res.detail}")
                still = [n for n in graded.fail_to_pass if outcomes.get(n) in ("passed", "xfailed")]
                if still:
                    return self.reject(RejectReason.F2P_DID_NOT_FAIL, f"{len(still)} hidden tests pass, e.g. {still[0]}")
                red = [n for n in graded.pass_to_pass if outcomes.get(n) not in ("passed", "xfailed")]
                return self.reject(RejectReason.SUITE_RED_AFTER_DELETION,
                                   f"{len(red)} PASS_TO_PASS tests fail, e.g. {red[:1]}; flags {res.flags}")
        return None

    def _scrubbed_copy(self, ws: Path, deletion: Any, original: dict[str, str | None],
                       broken: dict[str, str | None]) -> Path:
        """The workspace the agent gets; stub files (.pyi) the scrub edits become part of the task."""
        from taskforge.scrub import scrub_workspace

        agent_ws = ws.parent / "agent"
        shutil.copytree(ws, agent_ws, symlinks=True)
        report = scrub_workspace(agent_ws, deletion.deleted)
        for rel in report.edited:
            original.setdefault(rel, (self.profile.repo_dir / rel).read_text())
            broken[rel] = (agent_ws / rel).read_text()
        for rel in report.removed:
            if rel.endswith(".pyi") and (self.profile.repo_dir / rel).is_file():
                original.setdefault(rel, (self.profile.repo_dir / rel).read_text())
                broken[rel] = None
        return agent_ws

    def _audit(self, agent_ws: Path, deletion: Any, task: Task) -> Any:
        from taskforge.audit import audit_task_workspace

        deleted_sources = {q: _entity_source(deletion, q, self.profile.index) for q in deletion.deleted}
        env_dir = self.env.location if self.env.backend == "local" else None
        image = self.env.location if self.env.backend == "docker" else None
        return audit_task_workspace(agent_ws, {k: v for k, v in deleted_sources.items() if v},
                                    env_dir=env_dir, image=image, allowed_text=(task.problem_statement,))


def _zeroing(res: Any) -> bool:
    return any(f in ("tampering", "canary_failed", "no_report", "timeout", "grader_error") for f in res.flags)


def _entity_source(deletion: Any, qualname: str, index: Any) -> str:
    e = index.get(qualname)
    if e is None:
        return ""
    text = deletion.files_before.get(e.file)
    if not text:
        return ""
    lines = text.splitlines(keepends=True)
    return "".join(lines[e.start_line - 1:e.end_line])


def _write_files(root: Path, files: Mapping[str, str | None]) -> None:
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def make_instance_id(name: str, version: str, strategy: str, target: str, patches: Any) -> str:
    """Deterministic: the same deletion of the same repository always gets the same id."""
    import hashlib

    h = hashlib.sha256((patches.setup_patch + "\0" + patches.patch).encode()).hexdigest()[:8]
    return f"{name}-{version}__{strategy}__{target}-{h}"
