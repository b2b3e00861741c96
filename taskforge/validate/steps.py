"""Validate one candidate feature in the sandbox; the result is a ``Task`` or a ``Rejected`` value.

Cheapest checks first, so bad candidates cost little (each step can reject). Three test sets drive it:
*covering* (tests that execute the feature's body), *affected* (reliable tests that executed a line the
deletion changed, per the baseline's line coverage: the only tests whose path can reach changed code), and the
PASS_TO_PASS tests of the *modified* test files (test files the hiding edited but did not remove).

Every run is killed after ``run_limit_s`` (k x the baseline's slowest suite run + margin,
``taskforge.validate.from_baseline``); collection errors the baseline already had are subtracted.

1. ``delete``: the strategy's libcst transform; touched files must compile and none may be one the test
   runner imports itself (``EnvSpec.runner_files`` -> ``RUNNER_MODULE``) (no sandbox run). When the
   deleted names are gone (delete, module), the test files whose import uses them
   (``generators.import_time``) join the covering tests; if that is every test file -> ``IMPORT_BROKEN``.
   When the deleted or stubbed code ran outside every test in the coverage run (a test module's import
   runs it), the broken workspace is collected once (``collect_broken``): the files that no longer collect
   join the covering tests the same way.
2. ``early``: covering + affected on the broken code with the tests intact (one small run).
   FAIL_TO_PASS = covering tests that now fail. None -> ``NO_FAIL_TO_PASS``; nothing reported ->
   ``IMPORT_BROKEN``. Other red tests are *suspects* (they may pass once the hidden tests are gone).
3. ``hide``: remove the FAIL_TO_PASS tests from the workspace (``generators.hidden_tests``).
   Failing tests generated at collection (no definition to remove) leave both test sets, like doctests.
4. ``hidden_ws``: on the agent's broken workspace (tests hidden), run the suspects, the affected tests of
   the modified test files, and one test of every modified file (it still collects) ->
   ``SUITE_RED_AFTER_DELETION``; such ``p2p_broken`` runs stop at their first red test.
5. ``contract`` through the reward path (``taskforge.reward.reward.reward``), exactly as an agent's patch is
   graded, in the repository's one environment (never rebuilt; each grading gets a fresh workspace):
   repeat 1 grades the gold patch on FAIL_TO_PASS + the affected PASS_TO_PASS + the PASS_TO_PASS of the
   hidden files (where the grading harness edits) (score 1: contract 2 and 4; first, as the smaller
   grading and the likelier to reject), then the empty patch on FAIL_TO_PASS + the affected PASS_TO_PASS +
   the first PASS_TO_PASS test of every test file (score 0, every hidden test red, every graded
   PASS_TO_PASS green: contract 1 and 3). Repeats after the first grade the empty patch on
   FAIL_TO_PASS alone, as ``taskforge validate`` does (hidden tests green there but red in repeat 1 depend
   on the PASS_TO_PASS tests run before them: they leave the task, ``provenance["order_dependent"]``), and
   re-run the affected tests of the modified files on the agent's workspace; the gold patch is graded again only when the baseline has fewer runs than the repeats
   asked for: with the gold patch every file is the original, so the baseline's N runs (every
   FAIL_TO_PASS test is reliable: it passed in all of them) already are its repeats. Why the other tests
   need no grading: a test that executes no changed line (line coverage, import time and the child
   processes it starts included), from a test file that is byte-identical everywhere, runs the very code
   the baseline ran N times and the profile's grading check (``taskforge.profile.harness_check``) ran
   once more under the grading harness; a test that fails there is no PASS_TO_PASS test of any task
   (without a check that gave a verdict, the empty patch is graded on every test as before). The
   unaffected PASS_TO_PASS of the hidden files, where this task's canaries go, ran under them in the gold
   grading just before (pyparsing 3.3 and multidict 7.2 keep most tests in one or two files, so those
   were 1,900 of pyparsing's 2,094 tests in each of the two gradings). One test of each file still runs,
   so a file that no longer imports is seen. (The empty-patch grading of
   the full suite was 44% of attrs 26.1's candidate time, and 60-86 s of each pyparsing 3.3 candidate.)
   A PASS_TO_PASS test that coverage missed and the deletion broke would be one the agent must make pass
   all the same, and the gold patch does (it is the original): the reward is unchanged, only the test's
   label. PASS_TO_PASS tests red in the empty-patch grading (e.g. a
   restored test module importing the deleted name) must pass on the agent's workspace and are added to
   every gold grading (repeat 1 grades the gold patch again when one of them was not in its first).
6. ``audit`` (run before ``contract``: it needs no test run): scrub the agent's workspace and search it, its
   git store and the environment for the deleted code (``taskforge.audit.audit``) -> ``LEAK_FOUND``.
7. ``battery`` (``Settings.battery``; run before ``contract``, after ``audit``, so a cheatable candidate pays
   for no gold or empty-patch grading): cheap stand-ins for the deleted code graded on the hidden tests
   (``taskforge.validate.battery``) -> ``CHEATABLE``; grading stops once the verdict is certain, and
   each stand-in runs only up to a witness (a hidden test the first stand-in failed) unless one passes it;
   a hidden test that loops under a stand-in fails at a deadline (``BATTERY_DEADLINE_*``) and is a witness.
8. seals (after the contract's first gold grading, which confirms them): the forge chance over the FAIL_TO_PASS
   tests no seal guards -> ``WEAKLY_GUARDED`` (a few such tests, ``max_unguarded_share``, leave the task
   instead, ``provenance["unguarded"]``). A task over the limit even if every sealable assertion held
   (``_doomed``) has that gold grading and this verdict before the battery, so it pays for neither the
   battery nor the empty-patch grading.

The warm sandbox's runs (every check above but the gold gradings, which are confined) share a cache of
assert-rewritten test modules keyed by their bytes (``sandboxes/runner/rewrite_cache.py``): a test file
is rewritten once per worker, not once per run; the battery's gradings plant identical canaries for that.

``mode="naive"`` (the benchmark's reference) runs the same checks the expensive way: every check runs
the full suite, every grading grades every test, and every run gets a fresh copy of the environment.

``validate_candidate(job)`` is a picklable stage function (process pool or Ray); it never raises.
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from taskforge.core import pyparse
from taskforge.core.companions import companions
from taskforge.core.files import copy_ignore
from taskforge.core.outcomes import Accepted, Rejected, RejectReason
from taskforge.core.patches import diff
from taskforge.core.settings import Settings
from taskforge.core.task import Task, ValidationRun
from taskforge.core.test_homes import Homes, test_homes
from taskforge.core.testreport import ReportFlag
from taskforge.reward.canaries import forge_chance, no_copies
from taskforge.reward.result import ZEROING_FLAGS, RewardFlag, RewardResult
from taskforge.reward.strict_asserts import strict_source
from taskforge.validate.from_baseline import new_collection_errors, run_limit_s
from taskforge.validate.jobs import MODES, CandidateJob, CandidateResult, changed_lines, hideable
from taskforge.validate.task_record import build_task, entity_source, make_instance_id
from taskforge.validate.worker import FixedEnv, environment_index, load_profile, prepared_env, sandbox_for
from taskforge.validate.workspace_files import remove_whole_files, write_files

# a hidden test still running under a stand-in after FLOOR + FACTOR x the slowest hidden test's baseline
# duration fails (``RunRequest.test_deadline_s``): only a stand-in that passes a test but runs it 10x slower
# than the original code, plus 5 s, could be misjudged, and such a stand-in times out an agent's grading too.
# The runs of our own broken code (``run_tests``: early, hidden_ws, p2p_broken; the empty-patch grading) get
# the same deadline over the slowest test they run: pyrsistent's ``test_segfault_issue_52`` retries on
# AttributeError forever once ``transform`` is gone, and its candidates each ran into the 77 s run limit
# (the longest stretch without a verdict, 128 s) where the test now fails after ~6 s
_STRICT_NAME = "_tfq0000000000"  # the strict equality's name in ``_forge_chance`` (gradings draw their own)
BATTERY_DEADLINE_FLOOR_S = 5.0
BATTERY_DEADLINE_FACTOR = 10.0


def validate_candidate(job: CandidateJob) -> CandidateResult:
    """Run the checks of the module docstring; a bug of ours becomes ``INTERNAL_ERROR`` with the trace."""
    start = time.monotonic()
    validation = None
    try:
        validation = _Validation(job)
        return validation.run()
    except Exception as exc:  # one candidate never aborts a run
        stopped = _stop_behind(exc)
        if stopped is not None:  # the run is stopping: this candidate is undecided (a resumed run retries it)
            raise stopped from exc
        detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        return CandidateResult(job.candidate.candidate_id,
                               Rejected(job.candidate.candidate_id, RejectReason.INTERNAL_ERROR,
                                        detail[-2000:], time.monotonic() - start),
                               seconds=time.monotonic() - start)
    finally:
        if validation is not None:
            validation.cleanup()


def _stop_behind(exc: BaseException) -> BaseException | None:
    """The ``RunStopped`` that ``exc`` was raised while handling, if any: cattrs 26.2's candidate in flight at
    the CPU cap failed to remove its workspace (a test was still writing into it) as the stop unwound, and the
    ``OSError`` of that cleanup hid the stop, so the candidate was journaled as ``internal_error``."""
    from taskforge.pipeline.stopping import RunStopped

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, RunStopped):
            return cur
        seen.add(id(cur))
        cur = cur.__context__
    return None


class _Validation:
    """One candidate's validation; holds the per-candidate state of the steps."""

    def __init__(self, job: CandidateJob) -> None:
        if job.mode not in MODES:
            raise ValueError(f"unknown validation mode {job.mode!r}; expected one of {MODES}")
        self.job = job
        self.cand = job.candidate
        self.naive = job.mode == "naive"
        self.settings = Settings.load(dict(job.settings))
        self.profile = load_profile(job.profile_dir)
        self.sandbox = job.sandbox if job.sandbox is not None else sandbox_for(job.settings, warm=not self.naive)
        self.env = prepared_env(job.profile_dir, self.sandbox)
        self.limit_s = run_limit_s(self.profile.baseline, self.settings)  # k x baseline + margin
        self.start = time.monotonic()
        self.test_seconds = 0.0
        self.stages: dict[str, float] = {}
        self.stage_cpu: dict[str, float] = {}
        self._cpu_mark = time.process_time()
        self.runs: list[ValidationRun] = []
        self._scratch: list[str] = []
        self.repeat_hidden: tuple[str, ...] = ()  # affected PASS_TO_PASS of the modified test files
        self.unhideable: tuple[str, ...] = ()  # failing generated tests left visible, in neither test set
        self.seals: dict[str, tuple[str, ...]] = {}  # the gold probe's confirmed sealed sites (reward.seals)
        self.order_dependent: tuple[str, ...] = ()  # hidden tests green under the deletion when run alone
        self.probed = False
        self.first_gold_verdict: CandidateResult | None = None  # ``_first_gold``
        self.seal_verdicts: dict[tuple[str, ...], Any] = {}  # ``_seal_verdict`` by FAIL_TO_PASS

    def cleanup(self) -> None:
        for d in self._scratch:
            shutil.rmtree(d, ignore_errors=True)

    # -- helpers --------------------------------------------------------------------------------------
    def result(self, outcome: Accepted | Rejected) -> CandidateResult:
        return CandidateResult(self.cand.candidate_id, outcome, round(self.test_seconds, 3),
                               time.monotonic() - self.start, dict(self.stages), len(self.runs),
                               {k: round(v, 4) for k, v in self.stage_cpu.items()})

    def reject(self, reason: RejectReason, detail: str = "") -> CandidateResult:
        return self.result(Rejected(self.cand.candidate_id, reason, detail[:2000], time.monotonic() - self.start))

    def lap(self, stage: str, since: float) -> float:
        """Add wall time since ``since`` (and this process's CPU since the previous lap) to ``stage``."""
        now, cpu = time.monotonic(), time.process_time()
        self.stages[stage] = round(self.stages.get(stage, 0.0) + now - since, 4)
        self.stage_cpu[stage] = self.stage_cpu.get(stage, 0.0) + cpu - self._cpu_mark
        self._cpu_mark = cpu
        return now

    def env_for_run(self) -> Any:
        """The shared environment; in naive mode a fresh copy of it for every run."""
        if not self.naive:
            return self.env
        tmp = tempfile.mkdtemp(prefix="tf-naive-env-")
        self._scratch.append(tmp)
        return self.sandbox.clone_env(self.env, Path(tmp))

    def run_tests(self, workspace: Path, tests: tuple[str, ...], check: str, repeat: int,
                  record: bool = True) -> Any:
        """Run ``tests`` (naive: the whole suite) on ``workspace``; MISSING for any that did not report.

        A ``p2p_broken`` check rejects on its first red test, so it stops there (``--maxfail=1``): the tests
        it did not reach are MISSING, i.e. red, and the verdict is the one the whole run would give.
        ``record=False``: the validation record keeps the run's cost, not its outcomes (our own copies).
        """
        from sandboxes.protocol import RunRequest

        t = time.monotonic()
        stop = {"PYTEST_ADDOPTS": "--maxfail=1"} if check == "p2p_broken" and not self.naive else {}
        default, own = self.test_deadlines(() if self.naive else tests)
        along = companions(self.profile.baseline.skipped, tests)  # ungraded (taskforge.core.companions)
        request = RunRequest(tests=() if self.naive else (*tests, *along), timeout_s=self.limit_s,
                             tracebacks=self.naive, env=stop, test_deadline_s=default, test_deadlines=own)
        out = self.sandbox.run(self.env_for_run(), workspace, request)
        elapsed = time.monotonic() - t
        self.test_seconds += elapsed
        report = out.report.with_missing(tests)
        self.runs.append(ValidationRun(check, repeat, report.all_ok(tests) and not report.timed_out,
                                       {n: report.outcome_of(n).value for n in tests} if record else {},
                                       round(elapsed, 3)))
        return report

    def test_deadlines(self, tests: tuple[str, ...], timeout_s: float | None = None
                       ) -> tuple[float, dict[str, float]]:
        """When a test of a run of our own code fails: (the default deadline, the slow tests' own ones).

        A test's deadline is FLOOR + FACTOR x its baseline duration, at least the default's FLOOR + FACTOR x
        the 90th percentile of ``tests``' durations (of every test when ``tests`` is empty), which also holds
        for an id the baseline never ran (a canary). 0, or left out: none, the run's limit holds. One deadline
        over the slowest test gave soupsieve's always-equal stand-in 43 s to loop in a 0.01 s test (its
        slowest hidden test takes 3.8 s): 88 s of one candidate's 114.
        """
        durations = self.profile.baseline.durations
        known = sorted(float(durations.get(n, 0.0)) for n in (tests or tuple(durations)))
        p90 = known[int(0.9 * (len(known) - 1))] if known else 0.0
        limit = timeout_s or self.limit_s

        def deadline(seconds: float) -> float:
            s = BATTERY_DEADLINE_FLOOR_S + BATTERY_DEADLINE_FACTOR * seconds
            return round(s, 3) if s < limit else 0.0

        own = {n: deadline(float(durations[n])) for n in (tests or tuple(durations))
               if float(durations.get(n, 0.0)) > p90}
        return deadline(p90), own

    def _collected(self, workspace: Path, check: str = "collect_hidden") -> tuple[frozenset[str], tuple[str, ...]]:
        """Node ids pytest collects from the whole suite of ``workspace``, and files that fail to collect."""
        from sandboxes.protocol import RunRequest

        t = time.monotonic()
        out = self.sandbox.run(self.env_for_run(), workspace,
                               RunRequest(collect_only=True, timeout_s=self.limit_s))
        self.test_seconds += time.monotonic() - t
        errors = new_collection_errors(out.report.collection_errors, self.profile.baseline)
        self.runs.append(ValidationRun(check, 1, not errors, {}, round(time.monotonic() - t, 3)))
        return out.report.nodeids(), errors

    def _with_broken_files(self, covering: tuple[str, ...], files: frozenset[str],
                           why: str) -> tuple[str, ...] | CandidateResult:
        """``covering`` and the reliable tests of ``files`` (test files the deletion breaks whole), or the
        ``IMPORT_BROKEN`` rejection (``why``) when they are every test file: no test would be left."""
        reliable = self.profile.baseline.reliable
        if files and {n.split("::", 1)[0] for n in reliable} <= files:
            return self.reject(RejectReason.IMPORT_BROKEN, f"{why}: no test would be left")
        return tuple(sorted(set(covering) | {n for n in reliable if n.split("::", 1)[0] in files}))

    def _runs_at_collection(self, deletion: Any) -> bool:
        """Whether the body of a deleted or stubbed function ran outside every test in the coverage run
        (``CoverageMap.ran_outside_tests``): collection, a test module's import (pyparsing 3.3's
        test_diagram.py builds grammars from ``examples/`` at import, test_matplotlib_cases.py imports
        matplotlib, which parses with pyparsing), session hooks. A class or module counts through its
        functions and methods (a class body always runs at import). Maps without either answer False."""
        index, cov = self.profile.index, self.profile.coverage
        if index is None or not (cov.outside or cov.collection):
            return False
        for q in (*deletion.deleted, *deletion.stubbed):
            if q not in index:
                continue
            e = index.entity(q)
            if e.kind.value in ("function", "method"):
                inner = [e]
            else:
                prefix = "" if e.kind.value == "module" else q + "."
                inner = [f for f in index.in_file(e.file) if f.kind.value in ("function", "method")
                         and f.qualname.startswith(prefix)]
            if any(cov.ran_outside_tests(f) for f in inner):
                return True
        return False

    def grade(self, task: Task, patch: str, trees: Any, *, trusted: bool = False,
              timeout_s: float | None = None, settings: Settings | None = None,
              plan_seed: int | None = None, stop_at_failure: bool = False, stop_after: str = "",
              test_deadline_s: float = 0.0, test_deadlines: Mapping[str, float] | None = None,
              stop_at_failure_of: tuple[str, ...] = (), seal_probe: bool = False) -> Any:
        """Grade through the reward path; ``trusted`` (our own code: the empty patch, the battery's
        stand-ins) may fork from the warm sandbox, the gold patch is graded as an agent's patch is."""
        from taskforge.reward.reward import reward

        t = time.monotonic()
        res = reward(task, patch, sandbox=self.sandbox, trees=trees, tracebacks=self.naive,
                     settings=settings or self.settings, trusted=trusted, timeout_s=timeout_s or self.limit_s,
                     envs=FixedEnv(self.env_for_run()), plan_seed=plan_seed,  # type: ignore[arg-type]
                     stop_at_failure=stop_at_failure, stop_after=stop_after, test_deadline_s=test_deadline_s,
                     test_deadlines=test_deadlines,
                     stop_at_failure_of=stop_at_failure_of, seal_probe=seal_probe)
        self.test_seconds += time.monotonic() - t
        return res

    # -- the checks ------------------------------------------------------------------------------------
    def run(self) -> CandidateResult:
        from generators.dependent_stubs import covering_of_stubbed
        from generators.hidden_tests import hide_tests, normalize_nodeid
        from generators.import_time import files_broken_by_removal
        from generators.registry import all_strategies
        from generators.static_index import is_test_file

        profile, spec = self.profile, self.profile.spec
        repo = profile.repo_dir
        reliable = profile.baseline.reliable
        t = time.monotonic()
        strategy = all_strategies()[self.cand.strategy]
        if hasattr(strategy, "delete_candidate"):  # a feature or a composition (protocol.ProfileStrategy)
            deletion = strategy.delete_candidate(self.cand, profile)
        else:
            deletion = strategy.delete(profile.index.entity(self.cand.entity), profile.index, repo)
        if isinstance(deletion, Rejected):
            return self.reject(deletion.reason, deletion.detail)
        in_runner = sorted(set(deletion.files_after) & set(spec.runner_files))
        if in_runner:  # a feature or a dependent reaching into a file pytest imports itself (EnvSpec.runner_files)
            return self.reject(RejectReason.RUNNER_MODULE, f"the deletion edits {in_runner[:3]}, which the test "
                               "runner imports before any plugin: they stay whole and every grading restores them")
        for path, text in deletion.files_after.items():
            if text is not None and path.endswith(".py"):
                try:
                    compile(text, path, "exec")
                except SyntaxError as exc:
                    return self.reject(RejectReason.TRANSFORM_FAILED, f"{path} does not compile: {exc}"
                                       + (f" at {exc.text.strip()[:120]!r}" if exc.text else ""))
        t = self.lap("delete", t)

        with tempfile.TemporaryDirectory(prefix="tf-validate-") as tmp:
            ws = Path(tmp, "ws")
            shutil.copytree(repo, ws, ignore=copy_ignore, symlinks=True)
            write_files(ws, deletion.files_after)
            native = self._native_sources(spec)
            write_files(ws, dict.fromkeys(native))
            t = self.lap("workspace", t)
            # a bigger task (stubbed users of the target, generators.dependent_stubs): their tests are hidden too
            covering = tuple(sorted(set(self.cand.covering_tests) | covering_of_stubbed(deletion, profile)))
            if deletion.strategy != "stub":  # the names go: test modules whose import uses them fail whole
                gone = files_broken_by_removal(profile.index, repo, deletion.removed)
                joined = self._with_broken_files(covering, gone, "every test module uses the deleted names at "
                                                 f"import time (through {sorted(gone)[:3]})")
                if isinstance(joined, CandidateResult):
                    return joined
                covering = joined
            if self._runs_at_collection(deletion):
                # the stubbed code runs while test modules are imported: test files that no longer collect are
                # broken by the deletion itself, so their tests join FAIL_TO_PASS (a bigger task), where the
                # collection check after hiding would have charged them to the hiding (pyparsing 3.3: 9 stubs)
                _, errors = self._collected(ws, "collect_broken")
                joined = self._with_broken_files(covering, frozenset(errors), "no test module collects without "
                                                 f"the feature (e.g. {sorted(errors)[:3]})")
                if isinstance(joined, CandidateResult):
                    return joined
                covering = joined
            affected = self._affected(deletion.files_before, deletion.files_after, reliable)
            early = tuple(sorted(set(covering) | affected))
            report = self.run_tests(ws, early, "early_broken", 1)
            t = self.lap("early", t)
            if ReportFlag.NO_REPORT in report.flags or report.timed_out or not (
                    report.results or new_collection_errors(report.collection_errors, self.profile.baseline)):
                return self.reject(RejectReason.TIMEOUT if report.timed_out else RejectReason.IMPORT_BROKEN,
                                   f"the test run on the broken workspace reported nothing: {report.output_tail[-500:]}")
            red_covering = tuple(n for n in covering if not report.outcome_of(n).ok)
            # doctests of README files or source modules cannot be hidden: neither FAIL_TO_PASS nor PASS_TO_PASS
            f2p = tuple(n for n in red_covering if hideable(n, spec))
            if not f2p:
                why = (f"only unhideable doctests fail without the feature, e.g. {red_covering[0]}" if red_covering
                       else f"all {len(covering)} covering tests still pass without the feature")
                return self.reject(RejectReason.NO_FAIL_TO_PASS, why)
            covering_set = set(covering)
            suspects = {n for n in early if n not in covering_set and not report.outcome_of(n).ok}

            # a stub keeps the names: imports of them stay; a file whose every test is hidden goes whole
            hidden = hide_tests(ws, f2p, profile.index, deletion.removed)
            # a file whose every *reliable* test is hidden goes whole: its flaky, skipped or broken tests are
            # graded nowhere (markdown test_toc.py: the subTest tests would keep the deleted module's import)
            hidden = remove_whole_files(hidden, f2p, reliable, repo)
            write_files(ws, hidden.files_after)
            p2p = tuple(sorted(n for n in reliable - set(red_covering) if not hidden.hides(n)))
            if hidden.unmatched or hidden.inherited:
                # ids not defined where pytest collects them (a test class imported into, or inherited by,
                # another test module; a mixin's method, gone from every class inheriting it): hidden when
                # their definition went, which only collection can tell
                collected, errors = self._collected(ws)
                if errors:
                    return self.reject(RejectReason.TRANSFORM_FAILED,
                                       f"hiding the tests (libcst removal of {len(hidden.hidden)} test defs, "
                                       f"{len(hidden.helpers)} helpers) breaks collection of {list(errors)[:3]}")
                still = [n for n in f2p if n in collected]
                # generated at collection (no definition to remove, e.g. markdown's LegacyTestCase files):
                # like an unhideable doctest, neither FAIL_TO_PASS nor PASS_TO_PASS
                unmatched = set(hidden.unmatched)
                generated = {n for n in still if normalize_nodeid(n) in unmatched}
                if set(still) - generated:
                    miss = sorted(set(still) - generated)
                    return self.reject(RejectReason.TRANSFORM_FAILED,
                                       f"cannot hide {len(miss)} tests whose definition was removed, e.g. {miss[0]}")
                f2p = tuple(n for n in f2p if n not in generated)
                if not f2p:
                    return self.reject(RejectReason.NO_FAIL_TO_PASS,
                                       f"the {len(generated)} failing tests are generated at collection and cannot "
                                       f"be hidden, e.g. {min(generated)}")
                self.unhideable = tuple(sorted(generated))
                p2p = tuple(n for n in p2p if n in collected)
            if not p2p:
                return self.reject(RejectReason.NO_PASS_TO_PASS, "no test is left to pass")
            affected_p2p = tuple(n for n in p2p if n in affected)
            modified = {f for f, text in hidden.files_after.items() if text is not None}
            in_modified = [n for n in p2p if n.split("::", 1)[0] in modified]
            per_file = {n.split("::", 1)[0]: n for n in reversed(in_modified)}  # first test of each file
            hidden_checks = tuple(sorted((suspects & set(p2p)) | (set(in_modified) & affected)
                                         | set(per_file.values())))
            self.repeat_hidden = tuple(n for n in in_modified if n in affected)
            t = self.lap("hide", t)
            if hidden_checks or self.naive:
                report = self.run_tests(ws, hidden_checks if not self.naive else p2p, "p2p_broken", 1)
                t = self.lap("hidden_ws", t)
                red = [n for n in (p2p if self.naive else hidden_checks) if not report.outcome_of(n).ok]
                uncollected = sorted({n.split("::", 1)[0] for n in red}
                                     & set(new_collection_errors(report.collection_errors, self.profile.baseline)))
                if uncollected:
                    return self.reject(RejectReason.IMPORT_BROKEN, f"test files no longer collect on the broken "
                                       f"workspace: {uncollected[:3]}: {report.output_tail[-400:]}")
                if red:
                    return self.reject(RejectReason.SUITE_RED_AFTER_DELETION,
                                       f"PASS_TO_PASS tests fail without the feature (the check stops at the "
                                       f"first), e.g. {next((n for n in red if report.outcome_of(n).value != 'missing'), red[0])}")

            original = {**deletion.files_before, **hidden.files_before}
            broken = {**deletion.files_after, **hidden.files_after}
            agent_ws = self._scrubbed_copy(ws, deletion, original, broken)
            task = self._task(deletion, original, broken, f2p, p2p, lambda p: is_test_file(p, spec))
            if isinstance(task, Rejected):
                return self.reject(task.reason, task.detail)
            if native:  # the setup removes them; the gold patch does not bring them back (not the answer)
                task = dataclasses.replace(task, setup_patch=task.setup_patch + diff(native, dict.fromkeys(native),
                                                                                      sorted(native)))
            # where each test is defined (lark collects its tests in tests/__main__.py): once per candidate
            homes = test_homes(Path(self.profile.repo_dir), (*task.fail_to_pass, *task.pass_to_pass))
            if slow := self._too_slow_to_copy(task, homes):
                task = dataclasses.replace(task, provenance={**task.provenance, "uncopied": list(slow)})
            chance, weak, refused = self._guarded(task, original, homes)
            if refused is not None:
                return refused
            t = self.lap("task", t)
            # the audit before the contract: it needs no test run, and docutils 0.23's 20 leaking candidates
            # each paid for the gold and empty-patch gradings first (272 s of its 416 s of leak_found)
            audit = self._audit(agent_ws, deletion, task)
            t = self.lap("audit", t)
            if not audit.passed:
                hit = audit.hits[0]
                return self.reject(RejectReason.LEAK_FOUND, f"{hit.channel}:{hit.path}: {hit.evidence}")
            # tests whose changed copies pass on the gold code get none (calibration): before any gold grading
            if lenient := self._unchangeable(task, original, homes):
                task = dataclasses.replace(task, provenance={**task.provenance, "unchangeable": list(lenient)})
                chance, weak, refused = self._guarded(task, original, homes)
                if refused is not None:
                    return refused
            t = self.lap("calibrate", t)
            # the stand-ins before the contract: a cheatable candidate is refused before its gold and empty-patch
            # gradings (multidict 7.2.1: its 2 cheatable candidates took 232 s of the 745 s all candidates took,
            # 246 s of battery in 678 s of cheatable over session 40's runs). The battery's gradings are
            # unsealed here (no seal is confirmed yet); a stand-in that passes a sealed assertion passes its
            # strict in-process form too, so the verdict is the same
            def seal_verdict(graded: Task) -> CandidateResult | None:  # once the first gold grading probed
                return self._seal_verdict(graded, original, homes, deletion, chance)[3]

            # a task the seals cannot guard even if every sealable assertion holds (``_doomed``): its first gold
            # grading, which confirms the seals, goes before the battery, and the verdict on them right after
            # (idna 3.20: 5 weakly_guarded candidates paid ~60 s each of battery, gold and empty-patch gradings)
            if not self.naive and self._doomed(task, original, homes, deletion):
                if (verdict := self._first_gold(task, affected_p2p, homes)) is not None:
                    return verdict
                if (verdict := seal_verdict(task)) is not None:
                    return verdict
                t = time.monotonic()
            if self.settings.battery:  # part of the contract: naive mode pays for it too
                battery = self._battery(task)
                t = self.lap("battery", t)
                if battery.cheatable:
                    return self.reject(RejectReason.CHEATABLE, battery.detail)
            verdict = self._contract(task, affected_p2p, ws, homes, seal_verdict)
            t = time.monotonic()
            if verdict is not None:
                return verdict
            if self.order_dependent:
                from generators.difficulty import with_fail_to_pass

                dependent = set(self.order_dependent)
                kept = tuple(n for n in task.fail_to_pass if n not in dependent)
                task = dataclasses.replace(task, fail_to_pass=kept, difficulty=with_fail_to_pass(task.difficulty, len(kept)),
                                           provenance={**task.provenance, "order_dependent": list(self.order_dependent)})
            # a strong seal: the probe seals only sites whose literal a stub cannot produce (``seals._guessable``:
            # not ``b"value"`` for ``sign("value")``, not ``(False, None)``), so a confirmed one is strong. Red team,
            # session 40: when weak values were sealed too, any seal set the forge chance to 0 and a task whose
            # canaries guarded nothing (canary_forge_chance 1.0) was accepted and forged.
            # Session 41: any strong seal set the forge chance to 0, yet a seal guards only its own test. A
            # forger that computes the sealed values (part of the feature) and writes records for the other
            # FAIL_TO_PASS tests must still guess the canaries' blocks among those: the chance is over them
            # (0 when every test is sealed), and it is what ``max_forge_chance`` holds the task to
            # (refined: an unsealed test that runs only deleted lines some sealed test runs is guarded too, since
            # computing the sealed values takes implementing those lines; python-json-logger 4.2.0's parse
            # stub: 8 of 201 tests sealed, 193 echo-like ones with no literal, 37 candidates refused without it)
            sealed_chance, guarded, unguarded, refused = self._seal_verdict(task, original, homes, deletion, chance)
            if refused is not None:
                return refused
            if unguarded:
                # the few tests nothing guards leave the task: forging their records gains nothing then, and
                # the rest is guarded (idna 3.20: 6 error-branch tests of 6391, 3 candidates refused without it)
                from generators.difficulty import with_fail_to_pass

                kept = tuple(n for n in task.fail_to_pass if n not in set(unguarded))
                task = dataclasses.replace(task, fail_to_pass=kept, difficulty=with_fail_to_pass(task.difficulty, len(kept)),
                                           provenance={**task.provenance, "unguarded": list(unguarded)})
            # forge_chance: of the reward path (over the tests no seal guards); canary_forge_chance: of the
            # canaries alone, what a grader that seals nothing gives (the exported Harbor verifier)
            task = dataclasses.replace(task, provenance={
                **task.provenance, "forge_chance": sealed_chance, "canary_forge_chance": chance,
                **({"seal_guarded": len(guarded) - len(self.seals),
                    "seal_guarded_tests": list(guarded[len(self.seals):])} if self.seals else {}),
                **({"seals": {n: list(v) for n, v in self.seals.items()}} if self.seals else {})})
        task = dataclasses.replace(task, validation=tuple(self.runs), audit=audit,
                                   provenance={**task.provenance, "stage_seconds": dict(self.stages),
                                               "test_seconds": round(self.test_seconds, 3),
                                               "run_limit_s": self.limit_s,
                                               "unhideable_failing": list(self.unhideable[:20])})
        return self.result(Accepted(task))

    def _battery(self, task: Task) -> Any:
        """Grade the cheap stand-ins on the hidden tests; each grading is recorded as a validation run.

        ``frame_oracle`` is not graded here: it would reject nothing (it beats any ``assert f(x) == y`` test,
        and the reward's patch monitor zeroes what reads frames, ``frame_inspection``; the red-team
        catalogue checks that), and its grading can run to its time limit (a sqlparse task: 30 s, against
        0.5 s for each other stand-in). Each stand-in is first graded up to a witness
        (``run_battery(first_failure=True)``). Grading stops
        once the stand-ins graded so far make the task cheatable (the rejection is then certain). All
        gradings of one battery plant the same canaries (one ``plan_seed``, drawn afresh per battery): their
        test files are byte-identical, so the warm runs rewrite the hidden tests' asserts once.
        """
        from taskforge.reward.workspace import DirectoryTrees
        from taskforge.validate.battery import STAND_INS, run_battery

        trees = DirectoryTrees(self.profile.repo_dir)
        hidden_only = dataclasses.replace(task, pass_to_pass=())
        names = [n for n in STAND_INS if n != "frame_oracle"]
        # a stand-in can make the code under test loop: a few times what a grading of the hidden tests takes is
        # plenty (the baseline's: their durations plus a run's start and collection; the gold grading's once run)
        start = max(0.0, max(self.profile.baseline.run_seconds, default=0.0) - self.profile.baseline.suite_seconds())
        gold_s = max((r.seconds for r in self.runs if r.check == "gold_patch"),
                     default=max(10.0, start + self.profile.baseline.suite_seconds(task.fail_to_pass)))
        timeout = min(self.limit_s, max(30.0, 5 * gold_s))
        # ... and one test that loops fails after a few times its baseline duration: the failure is the
        # witness that ends the stand-in's grading (``run_battery``), instead of the grading's time limit
        default, own = self.test_deadlines(task.fail_to_pass, timeout)
        lenient = dataclasses.replace(self.settings, monitor_zero=False)  # a score means the tests were fooled
        seed = secrets.randbits(64)

        def grade(patch: str, stop_at_failure: bool = False, stop_after: str = "",
                  stop_at_failure_of: tuple[str, ...] = ()) -> Any:
            return self.grade(hidden_only, patch, trees, trusted=True, timeout_s=timeout, settings=lenient,
                              plan_seed=seed, stop_at_failure=stop_at_failure, stop_after=stop_after,
                              test_deadline_s=default, test_deadlines=own,
                              stop_at_failure_of=stop_at_failure_of)

        def record(name: str, stop: str, res: Any) -> None:
            self.runs.append(ValidationRun(f"battery_{name}{'_' + stop if stop else ''}", 1,
                                           res.score == 0.0, dict(res.outcomes), res.timings.get("total_s", 0.0)))

        return run_battery(task, self.profile.repo_dir, grade, names=names, stop_when_cheatable=True,
                           first_failure=True, record=record)

    def _seal_guarded(self, before: Mapping[str, str | None], after: Mapping[str, str | None],
                      f2p: tuple[str, ...], sealed: Iterable[str] | None = None) -> tuple[str, ...]:
        """The unsealed FAIL_TO_PASS tests every deleted line of which (in the baseline's coverage) a sealed test
        runs too: a forger that computes the sealed values has implemented those lines. One that runs a deleted
        line no sealed test runs is not guarded. One that runs none (it fails through its module's import: a
        module-level ``RULE = compile_rule(...)``) is guarded when the deleted lines that ran while the tests were
        collected are ones a sealed test runs (and there are some). ``sealed``: the sealed tests (default: the
        confirmed ``self.seals``)."""
        seals = set(self.seals if sealed is None else sealed)
        cov = self.profile.coverage
        run_by: dict[str, set[tuple[str, int]]] = {}
        at_collection: set[tuple[str, int]] = set()
        for f, old in before.items():
            lines = [ln for start, end in changed_lines(old, after.get(f)) for ln in range(start, end + 1)]
            for test, hit in cov.lines_run_by(f, lines, f2p).items():
                run_by.setdefault(test, set()).update((f, ln) for ln in hit)
            collected = cov.collection.get(f, frozenset())
            at_collection.update((f, ln) for ln in lines if ln in collected)
        by_seals = set().union(*(run_by.get(t, set()) for t in seals))
        through_import = bool(at_collection) and at_collection <= by_seals
        return tuple(t for t in f2p if t not in seals
                     and (run_by[t] <= by_seals if run_by.get(t) else through_import))

    def _seal_verdict(self, task: Task, original: Mapping[str, str | None], homes: Homes, deletion: Any,
                      chance: float) -> tuple[float, tuple[str, ...], tuple[str, ...], CandidateResult | None]:
        """Once the first gold grading has confirmed the seals: (the forge chance of the reward path, the
        FAIL_TO_PASS tests the seals guard, the few unguarded ones that leave the task, the ``WEAKLY_GUARDED``
        rejection when the chance is over ``max_forge_chance`` all the same). ``chance``: the canaries' alone,
        the chance when no seal held. Once per FAIL_TO_PASS set: the contract asks after its first gold grading,
        and ``run`` again after the contract (the coverage walk over idna's 6,000 tests is seconds)."""
        if (known := self.seal_verdicts.get(task.fail_to_pass)) is not None:
            return known  # type: ignore[no-any-return]
        self.seal_verdicts[task.fail_to_pass] = verdict = self._seal_verdict_of(task, original, homes, deletion, chance)
        return verdict

    def _seal_verdict_of(self, task: Task, original: Mapping[str, str | None], homes: Homes, deletion: Any,
                         chance: float) -> tuple[float, tuple[str, ...], tuple[str, ...], CandidateResult | None]:
        if not self.seals:
            refused = self.reject(RejectReason.WEAKLY_GUARDED, _weak_guard_detail(chance)
                                  + "; no sealed assertion held on the gold patch") \
                if chance > self.settings.max_forge_chance else None
            return chance, (), (), refused
        guarded = (*self.seals, *self._seal_guarded(deletion.files_before, deletion.files_after, task.fail_to_pass))
        sealed_chance = self._forge_chance(task, original, homes, sealed=guarded)
        unguarded: tuple[str, ...] = ()
        if sealed_chance > self.settings.max_forge_chance and (
                unguarded := self._unguarded_few(task.fail_to_pass, guarded)):
            sealed_chance = self._forge_chance(dataclasses.replace(task, fail_to_pass=tuple(
                n for n in task.fail_to_pass if n not in set(unguarded))), original, homes, sealed=guarded)
        if sealed_chance <= self.settings.max_forge_chance:
            return sealed_chance, guarded, unguarded, None
        return sealed_chance, guarded, unguarded, self.reject(RejectReason.WEAKLY_GUARDED, _weak_guard_detail(
            sealed_chance) + f"; {len(self.seals)} of {len(task.fail_to_pass)} FAIL_TO_PASS tests are sealed, "
            f"{len(guarded) - len(self.seals)} more run only deleted lines a sealed test runs, and the chance is "
            "over the others")

    def _doomed(self, task: Task, original: Mapping[str, str | None], homes: Homes, deletion: Any) -> bool:
        """Whether the task is over ``max_forge_chance`` even if every sealable assertion of its FAIL_TO_PASS
        tests holds on the gold patch (``_sealable_tests``; the tests their deleted lines guard counted, with
        no few unguarded ones to drop): then only seals that fail to hold could save it, through the canaries'
        own chance, and its first gold grading goes before the battery (``run``)."""
        sealable = self._sealable_tests(task, original, homes)
        if not sealable:
            return False
        guarded = (*sealable, *self._seal_guarded(deletion.files_before, deletion.files_after, task.fail_to_pass,
                                                  sealed=sealable))
        if self._unguarded_few(task.fail_to_pass, guarded):
            return False
        return self._forge_chance(task, original, homes, sealed=guarded) > self.settings.max_forge_chance

    def _unguarded_few(self, f2p: tuple[str, ...], guarded: tuple[str, ...]) -> tuple[str, ...]:
        """The FAIL_TO_PASS tests outside ``guarded`` when they are at most ``max_unguarded_share`` of ``f2p``
        and some test is guarded (empty otherwise: the task stands or falls on its forge chance)."""
        rest = tuple(n for n in f2p if n not in set(guarded))
        if not rest or len(rest) == len(f2p) or len(rest) > self.settings.max_unguarded_share * len(f2p):
            return ()
        return rest

    def _affected(self, before: Mapping[str, str | None], after: Mapping[str, str | None],
                  among: frozenset[str]) -> set[str]:
        """Reliable tests that executed a line the deletion changed, in the baseline (the coverage map)."""
        cov = self.profile.coverage
        hit: set[str] = set()
        for f, old in before.items():
            for start, end in changed_lines(old, after.get(f)):
                hit |= cov.tests_for_lines(f, start, end, among=among)
        return hit

    def _task(self, deletion: Any, original: Mapping[str, str | None], broken: Mapping[str, str | None],
              f2p: tuple[str, ...], p2p: tuple[str, ...], is_test: Any) -> Task | Rejected:
        return build_task(self.profile, self.cand, deletion, original, broken, f2p, p2p, is_test,
                          self.job.provenance, self.settings)

    def _too_slow_to_copy(self, task: Task, homes: Homes) -> tuple[str, ...]:
        """The tests of the hidden tests' files whose baseline run took longer than ``canary_copy_max_s``: the
        canaries copy none of them (``provenance["uncopied"]``)."""
        limit = float(self.settings.canary_copy_max_s)
        durations = self.profile.baseline.durations
        files = {homes.home(n).split("::", 1)[0] for n in task.fail_to_pass}
        return tuple(sorted(n for n in (*task.fail_to_pass, *task.pass_to_pass)
                            if durations.get(n, 0.0) > limit and homes.home(n).split("::", 1)[0] in files))

    def _guarded(self, task: Task, original: Mapping[str, str | None], homes: Homes
                 ) -> tuple[float, bool, CandidateResult | None]:
        """The canaries' forge chance, whether it is over ``max_forge_chance``, and the ``WEAKLY_GUARDED``
        rejection when it is and no assertion can be sealed: a task whose gold grading confirms a sealed
        assertion in a FAIL_TO_PASS test cannot be forged by writing records (reward.seals), so only one that
        can have none is rejected here, before any grading. Only strong values are sealable (a value a stub
        produces without the feature is not: ``seals._guessable``)."""
        chance = self._forge_chance(task, original, homes)
        weak = chance > self.settings.max_forge_chance
        if weak and not self._sealable_tests(task, original, homes):
            return chance, weak, self.reject(RejectReason.WEAKLY_GUARDED, _weak_guard_detail(chance))
        return chance, weak, None

    def _unchangeable(self, task: Task, original: Mapping[str, str | None], homes: Homes) -> tuple[str, ...]:
        """The tests of the hidden files whose changed copies pass on the original code (``calibration``):
        no grading plants a must-fail changed copy of them. Naive mode does not calibrate."""
        from taskforge.validate.calibration import CACHE_DIR, unchangeable_tests

        if self.naive:
            return ()
        files: dict[str, str] = {}
        for rel in sorted({homes.home(n).split("::", 1)[0] for n in task.fail_to_pass}):
            text = original.get(rel)
            path = Path(self.profile.repo_dir) / rel
            if text is None and path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
            if text is not None and rel.endswith(".py"):
                files[rel] = text
        found = unchangeable_tests(
            files, Path(self.profile.repo_dir),
            lambda ws, tests: self.run_tests(ws, tests, "canary_calibration", 1, record=False),
            Path(self.job.profile_dir) / CACHE_DIR,
            nodeids=(*self.profile.baseline.all_tests, *homes.homes(task.fail_to_pass),
                     *homes.homes(task.pass_to_pass)))
        return tuple(sorted(found))

    def _forge_chance(self, task: Task, original: Mapping[str, str | None], homes: Homes,
                      sealed: tuple[str, ...] = ()) -> float:
        """``canaries.forge_chance`` of the task's hidden test files, in the strict form they are graded in;
        ``sealed``: the FAIL_TO_PASS ids whose sealed sites the gradings check."""
        f2p = homes.homes(task.fail_to_pass)
        files: dict[str, str] = {}
        for rel in sorted({n.split("::", 1)[0] for n in f2p}):
            text = original.get(rel)
            path = Path(self.profile.repo_dir) / rel
            if text is None and path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
            if text is not None:
                files[rel] = strict_source(text, _STRICT_NAME)
        uncopied = homes.homes(task.provenance.get("uncopied", ()))
        return forge_chance(files, f2p, _STRICT_NAME, homes.loose() | no_copies(uncopied)
                            | no_copies(task.provenance.get("unchangeable", ())), sealed=homes.homes(sealed))

    def _sealable_tests(self, task: Task, original: Mapping[str, str | None], homes: Homes) -> tuple[str, ...]:
        """The FAIL_TO_PASS tests with an assertion the gold grading can seal (``reward.seals.sites``): the most
        it can confirm."""
        from taskforge.reward.seals import sites, units

        by_file: dict[str, dict[str, list[str]]] = {}  # home file -> test key -> the task's ids
        for n in task.fail_to_pass:
            rel, _, rest = homes.home(n).partition("::")
            by_file.setdefault(rel, {}).setdefault(rest.split("[", 1)[0], []).append(n)
        found: list[str] = []
        for rel, keys in by_file.items():
            text = original.get(rel)
            path = Path(self.profile.repo_dir) / rel
            if text is None and path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
            if text is None:
                continue
            try:
                tree = pyparse.parse(text)
            except (SyntaxError, ValueError):
                continue
            table = units(tree)
            at = {tail.split("#", 1)[0] for tail, *_ in sites(text, tree, keys)}  # where each site's test is defined
            found += [n for key, ids in keys.items() if key in table and table[key][1] in at for n in ids]
        return tuple(found)

    def _contract(self, task: Task, affected_p2p: tuple[str, ...], ws: Path, homes: Homes,
                  after_first_gold: Callable[[Task], CandidateResult | None] = lambda _: None
                  ) -> CandidateResult | None:
        """Empty patch scores 0 (F2P red), gold scores 1 — through the reward path, repeated (docstring).

        Repeat 1 grades the gold patch first: it is the smaller grading and the likelier to reject. It also
        grades the PASS_TO_PASS tests of the hidden files (the files the grading harness edits: canaries,
        strict equality), where tests red in the empty-patch grading mostly are (their files are collected
        for the hidden tests anyway, so they cost little), unless they are most of the suite and the grading
        check vouches for them (``_hidden_files_p2p``); a red one it did not grade makes repeat 1 grade the
        gold patch again. ``after_first_gold``: the verdict on the seals that grading confirmed (``run``), unless
        ``run`` graded it already (``_first_gold``).
        """
        from taskforge.reward.workspace import DirectoryTrees

        trees = DirectoryTrees(self.profile.repo_dir)
        red_in_empty: set[str] = set()
        first_gold: tuple[str, ...] = ()
        for repeat in range(1, max(1, self.settings.validation_repeats) + 1):
            t = time.monotonic()
            gold_first = repeat == 1 and not self.naive
            if gold_first:
                first_gold = self._first_gold_tests(task, affected_p2p, homes)
                graded_before = self.probed
                if (verdict := self._first_gold(task, affected_p2p, homes)) is not None:
                    return verdict
                if not graded_before and (verdict := after_first_gold(task)) is not None:
                    return verdict
            t = time.monotonic()
            check = self.profile.baseline.grading_check
            if self.naive or (repeat == 1 and (check is None or check.status not in ("passed", "dropped"))):
                graded = task  # no grading check vouches for the tests this one would leave out
            elif repeat == 1:  # what can be red without the feature, and a test of every file (it collects)
                graded = dataclasses.replace(task, pass_to_pass=tuple(sorted(
                    set(affected_p2p) | set(_first_of_each_file(task.pass_to_pass)))))
            else:  # exactly the grading `taskforge validate` gives the empty patch: FAIL_TO_PASS alone
                graded = dataclasses.replace(task, pass_to_pass=())
            default, own = self.test_deadlines((*graded.fail_to_pass, *graded.pass_to_pass))
            res = self.grade(graded, "", trees, trusted=True, test_deadline_s=default, test_deadlines=own)
            outcomes = dict(res.outcomes)
            ok = res.score == 0.0 and res.fraction == 0.0 and not _zeroing(res)
            alone = [n for n in graded.fail_to_pass if outcomes.get(n) == "passed"] if repeat > 1 else []
            if not ok and res.score == 0.0 and not _zeroing(res) and 0 < len(alone) < len(graded.fail_to_pass):
                # red beside the PASS_TO_PASS tests (repeat 1), green without them: no reliable FAIL_TO_PASS
                # test, nor a PASS_TO_PASS one. pyparsing 3.3.3's And.parseImpl stub: 6 instances of
                # testInfixNotationNestedInfixAsOperand pass alone, and `taskforge validate` called the
                # accepted task broken. They leave the task (graded nowhere, like flaky tests).
                self.order_dependent = tuple(sorted({*self.order_dependent, *alone}))
                task = dataclasses.replace(task, fail_to_pass=tuple(n for n in task.fail_to_pass if n not in alone))
                ok = True
            red = tuple(n for n in graded.pass_to_pass if outcomes.get(n) != "passed")
            self.runs.append(ValidationRun("empty_patch", repeat, ok, outcomes, res.timings.get("total_s", 0.0)))
            if ok and red:
                red_in_empty.update(red)
                ok = self.run_tests(ws, red, "p2p_broken", repeat).all_ok(red)
            t = self.lap("empty_patch", t)
            if not ok:
                return self._contract_reject("empty_patch", repeat, res, graded)
            if repeat > 1 and self.repeat_hidden and not self.naive:
                report = self.run_tests(ws, self.repeat_hidden, "p2p_broken", repeat)
                if not report.all_ok(self.repeat_hidden):
                    return self.reject(RejectReason.UNSTABLE, f"p2p_broken repeat {repeat} disagrees")
            if gold_first and red_in_empty <= set(first_gold):
                continue  # graded above on these tests
            if repeat > 1 and not self.naive and self.profile.baseline.runs >= self.settings.validation_repeats:
                continue  # the gold code is the original: the baseline's N runs are its repeats (docstring)
            gold_p2p = task.pass_to_pass if self.naive else tuple(sorted(set(affected_p2p) | red_in_empty))
            if (verdict := self._gold(task, gold_p2p, repeat, trees, t)) is not None:
                return verdict
        return None

    def _first_gold_tests(self, task: Task, affected_p2p: tuple[str, ...], homes: Homes) -> tuple[str, ...]:
        """The PASS_TO_PASS tests of the first gold grading: the affected ones and those of the hidden files, where
        the grading harness edits (by the files that define the tests: lark collects every test in
        tests/__main__.py, and by the collected file this was the whole suite)."""
        hidden_files = {homes.home(n).split("::", 1)[0] for n in task.fail_to_pass}
        return tuple(sorted(set(affected_p2p) | set(self._hidden_files_p2p(task, hidden_files, homes))))

    def _first_gold(self, task: Task, affected_p2p: tuple[str, ...], homes: Homes) -> CandidateResult | None:
        """Repeat 1's gold grading (``_contract``), once: it probes the seals. ``run`` may call it before the
        battery; the contract's own call then returns the verdict it gave (None: it scored 1)."""
        from taskforge.reward.workspace import DirectoryTrees

        if not self.probed:
            self.first_gold_verdict = self._gold(task, self._first_gold_tests(task, affected_p2p, homes), 1,
                                                 DirectoryTrees(self.profile.repo_dir), time.monotonic())
        return self.first_gold_verdict

    def _hidden_files_p2p(self, task: Task, hidden_files: set[str], homes: Homes) -> tuple[str, ...]:
        """The PASS_TO_PASS tests of ``hidden_files`` the first gold grading runs: all of them, unless the
        profile's grading check graded them under the harness already (canaries and strict equality in every
        test file, on the original: the gold code) and they cost more than ``first_gold_hidden_share`` of the
        suite and 2 s. Those left out and red in the empty-patch grading are graded on the gold patch then."""
        tests = tuple(n for n in task.pass_to_pass if homes.home(n).split("::", 1)[0] in hidden_files)
        baseline = self.profile.baseline
        check = baseline.grading_check
        if self.naive or check is None or check.status not in ("passed", "dropped"):
            return tests
        cost = baseline.suite_seconds(tests)
        return tests if cost <= max(2.0, self.settings.first_gold_hidden_share * baseline.suite_seconds()) else ()

    def _gold(self, task: Task, p2p: tuple[str, ...], repeat: int, trees: Any, t: float) -> CandidateResult | None:
        """Grade the gold patch on FAIL_TO_PASS + ``p2p`` as an agent's patch is graded: it must score 1."""
        graded = dataclasses.replace(task, pass_to_pass=p2p)
        probe = not self.probed  # the first: which sealed assertions hold (reward.seals); later ones seal them
        if self.seals:
            graded = dataclasses.replace(graded, provenance={**graded.provenance,
                                                             "seals": {n: list(v) for n, v in self.seals.items()}})
        res = self.grade(graded, task.patch, trees, seal_probe=probe)
        if probe:
            self.probed = True
            self.seals = dict(getattr(res, "seals", {}) or {})
        ok = res.score == 1.0
        self.runs.append(ValidationRun("gold_patch", repeat, ok, dict(res.outcomes), res.timings.get("total_s", 0.0)))
        self.lap("gold_patch", t)
        return None if ok else self._contract_reject("gold_patch", repeat, res, graded)

    def _contract_reject(self, check: str, repeat: int, res: Any, graded: Task) -> CandidateResult:
        outcomes = dict(res.outcomes)
        if RewardFlag.TIMEOUT in res.flags:
            return self.reject(RejectReason.TIMEOUT, f"{check} repeat {repeat}: {res.detail}")
        if repeat > 1:
            return self.reject(RejectReason.UNSTABLE, f"{check} repeat {repeat} disagrees: {res.detail}")
        if check == "gold_patch":
            return self.reject(RejectReason.GOLD_FAILED, f"gold scored {res.score}: {res.flags} {res.detail}")
        still = [n for n in graded.fail_to_pass if outcomes.get(n) == "passed"]
        if still:
            return self.reject(RejectReason.F2P_DID_NOT_FAIL, f"{len(still)} hidden tests pass, e.g. {still[0]}")
        red = [n for n in graded.pass_to_pass if outcomes.get(n) != "passed"]
        if not red and _zeroing(res):  # six's and ordered-set's canary failures were suite_red with 0 red
            return self.reject(RejectReason.EMPTY_PATCH_FLAGGED,
                               f"flags {[str(getattr(f, 'value', f)) for f in res.flags]}: {res.detail}")
        return self.reject(RejectReason.SUITE_RED_AFTER_DELETION,
                           f"{len(red)} PASS_TO_PASS tests fail, e.g. {red[:1]}; flags {list(res.flags)} {res.detail}")

    def _native_sources(self, spec: Any) -> dict[str, str]:
        """The native sources a pure-Python variant's workspace goes without (``extensions.native_sources``)."""
        if spec.compiled_extensions:
            return {}
        from generators.static_index import is_test_file
        from sandboxes.extensions import native_sources

        return native_sources(Path(self.profile.repo_dir), lambda p: is_test_file(p, spec))

    def _scrubbed_copy(self, ws: Path, deletion: Any, original: dict[str, str | None],
                       broken: dict[str, str | None]) -> Path:
        """The workspace the agent gets; stub files (.pyi) the scrub edits become part of the task."""
        from taskforge.audit.scrub import scrub_workspace

        agent_ws = ws.parent / "agent"
        shutil.copytree(ws, agent_ws, symlinks=True)
        report = scrub_workspace(agent_ws, deletion.deleted)
        for rel in report.edited:  # the bytes' text: a patch must keep a CRLF file's line ends
            original.setdefault(rel, (self.profile.repo_dir / rel).read_bytes().decode("utf-8"))
            broken[rel] = (agent_ws / rel).read_bytes().decode("utf-8")
        for rel in report.removed:
            if rel.endswith(".pyi") and (self.profile.repo_dir / rel).is_file():
                original.setdefault(rel, (self.profile.repo_dir / rel).read_bytes().decode("utf-8"))
                broken[rel] = None
        return agent_ws

    def _audit(self, agent_ws: Path, deletion: Any, task: Task) -> Any:
        from taskforge.audit.audit import audit_task_workspace

        deleted_sources = {q: entity_source(deletion, q, self.profile.index) for q in deletion.deleted}
        files = self.sandbox.environment_files(self.env)
        # the environment is read once per worker for every entity of the repository, not once per candidate
        index = environment_index(str(self.job.profile_dir), str(files.directory)) \
            if files.directory is not None and not self.naive else None
        stdlib_index = environment_index(str(self.job.profile_dir), str(files.stdlib), files.stdlib_skip) \
            if files.stdlib is not None and not self.naive else None
        return audit_task_workspace(agent_ws, {k: v for k, v in deleted_sources.items() if v},
                                    env_dir=files.directory, image=files.image,
                                    allowed_text=(task.problem_statement,),
                                    image_cache=Path(self.settings.work_dir) / "audit-images",
                                    base_image=files.base_image, env_index=index, stdlib=files.stdlib,
                                    stdlib_skip=files.stdlib_skip, stdlib_index=stdlib_index,
                                    src_roots=self.profile.spec.src_roots)


def _first_of_each_file(tests: tuple[str, ...]) -> tuple[str, ...]:
    """The first test id of every file in ``tests``: a grading that runs it collects (imports) that file."""
    first: dict[str, str] = {}
    for n in tests:
        first.setdefault(n.split("::", 1)[0], n)
    return tuple(first.values())


def _weak_guard_detail(chance: float) -> str:
    if chance >= 1.0:
        return ("no FAIL_TO_PASS test has an expected literal to plant changed copies of: a forger that rewrites "
                "the runner's records and passes the tests its stand-in ran would pass every grading "
                "(max_forge_chance)")
    return (f"a forger that rewrites the runner's records would pick every original out of its changed copies in "
            f"1 of {1 / chance:.0f} gradings (max_forge_chance)")


def _zeroing(res: RewardResult) -> bool:
    return any(f in ZEROING_FLAGS for f in res.flags)


__all__ = ["MODES", "CandidateJob", "CandidateResult", "changed_lines", "make_instance_id", "validate_candidate"]
