"""The reward: grade an agent's patch against a task in a fresh sandbox workspace, tamper-evident.

``reward(task, patch, sandbox=..., trees=...)`` and ``reward_many(pairs, ..., jobs=N)`` return
``RewardResult`` values; they never raise for anything the patch or the code under test does.

Grading (the reward contract in ``DESIGN.md``; workspace assembly in ``taskforge.reward.workspace``):
a fresh workspace from the original tree + ``setup_patch``; the agent patch vetted and applied to
non-test files only (``taskforge.reward.patch_guard``); every test and test-support file restored from the
original, new ones deleted, and so is every file the test runner imports itself (``EnvSpec.runner_files``); the pytest configuration pinned (``-c`` clean ini, ``--rootdir``,
``--confcutdir``; ``PYTEST_ADDOPTS``/``PYTEST_PLUGINS`` emptied); only FAIL_TO_PASS + PASS_TO_PASS
run, by node id, together with secret canaries (``taskforge.reward.canaries``) and the grading plugin that
checks the run's integrity. A test that did not report counts as failed; a timeout scores 0; a
refused patch scores 0; tampering evidence (canaries, missing report, startup hooks, symlinks, what the
grading plugin found, e.g. a name rebound in a test module's namespace) scores 0 and sets the ``tampering`` flag.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import random
import secrets
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import unidiff

from sandboxes.protocol import RunRequest, Sandbox
from taskforge.core.companions import companions
from taskforge.core.environment import PreparedEnv
from taskforge.core.errors import PatchError, TaskforgeError
from taskforge.core.patches import apply
from taskforge.core.settings import Settings
from taskforge.core.task import Task
from taskforge.core.test_homes import test_homes
from taskforge.core.testreport import Outcome, ReportFlag, TestReport
from taskforge.reward.canaries import plant_canaries, write_plugin
from taskforge.reward.monitor import scan_patch
from taskforge.reward.patch_guard import ProtectedPaths, apply_vetted, vet_patch
from taskforge.reward.result import ZEROING_FLAGS, RewardFlag, RewardResult
from taskforge.reward.seals import SealPlan, plan_for
from taskforge.reward.strict_asserts import strict_source
from taskforge.reward.workspace import (
    OriginalTree,
    SharedOriginals,
    original_ini,
    pinned_options,
    plugin_modules,
    restore_protected,
    stray_symlinks,
    walk_files,
    write_clean_ini,
)


class EnvCache:
    """Prepared environments by ``EnvSpec.key``, shared by the gradings of one process (thread-safe)."""

    def __init__(self) -> None:
        self._envs: dict[str, PreparedEnv] = {}
        self._lock = threading.Lock()

    def get(self, sandbox: Sandbox, task: Task, original: Path) -> PreparedEnv:
        key = f"{sandbox.name}:{task.env_spec.key}"
        with self._lock:
            if key not in self._envs:
                self._envs[key] = sandbox.prepare(task.env_spec, original)
            return self._envs[key]


class _PlantedMemo:
    """The test files and canary plan of the last few seeded plans (``reward(plan_seed=...)``), thread-safe.

    A seeded plan is a function of its seed and the files it plants into, so the next grading with the same
    seed on the same files writes the stored files instead of planting again (only the grading plugin, whose
    module name is always drawn afresh, is written anew)."""

    def __init__(self, size: int = 4) -> None:
        self._items: dict[Any, tuple[dict[str, str], Any]] = {}
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Any) -> tuple[dict[str, str], Any] | None:
        if key is None:
            return None
        with self._lock:
            return self._items.get(key)

    def put(self, key: Any, value: tuple[dict[str, str], Any]) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.pop(next(iter(self._items)))


_PLANTED = _PlantedMemo()
_ORIGINALS = SharedOriginals()


def _patch_paths(patch: str) -> set[str]:
    try:
        parsed = unidiff.PatchSet(patch)
    except unidiff.UnidiffParseError:
        return set()
    return {f.path for f in parsed}


def _result(task: Task, flags: Iterable[RewardFlag], detail: str, timings: Mapping[str, float],
            outcomes: Mapping[str, str] | None = None, durations: Mapping[str, float] | None = None,
            fraction: float = 0.0, p2p_fraction: float = 0.0, score: float = 0.0) -> RewardResult:
    return RewardResult(task.instance_id, score, fraction, dict(outcomes or {}), dict(durations or {}),
                        {k: round(v, 4) for k, v in timings.items()}, tuple(dict.fromkeys(flags)), detail,
                        p2p_fraction)


def grading_limit_s(task: Task, settings: Settings) -> float:
    """The task's own run limit (k x its baseline + margin, recorded at validation), never above the setting."""
    limit = task.provenance.get("run_limit_s") if isinstance(task.provenance, Mapping) else None
    if isinstance(limit, (int, float)) and limit > 0:
        return min(float(limit), float(settings.test_timeout_s))
    return float(settings.test_timeout_s)


# the deadline of a must-fail canary in a trusted grading with deadlines (our own stand-ins at validation): a
# deadline can only turn a test into a failure, which such a canary must be anyway. A stub caller that loops on
# the broken code (pyrsistent's retry-forever test) has up to TWIN_MAX look-alikes; at the test's own deadline
# each would cost its full deadline in every empty-patch grading
CANARY_DEADLINE_S = 0.5


def reward(task: Task, patch: str, *, sandbox: Sandbox, trees: OriginalTree, settings: Settings | None = None,
           timeout_s: float | None = None, envs: EnvCache | None = None, tracebacks: bool = True,
           trusted: bool = False, plan_seed: int | None = None, stop_at_failure: bool = False,
           stop_after: str = "", test_deadline_s: float = 0.0, test_deadlines: Mapping[str, float] | None = None,
           stop_at_failure_of: tuple[str, ...] = (), seal_probe: bool = False) -> RewardResult:
    """Grade ``patch`` (a unified diff against the broken workspace) on ``task`` in a fresh workspace.

    ``tracebacks=False`` runs pytest with ``--tb=no`` (validation reads outcomes only); scores are the same.
    ``trusted=True`` (our own stand-ins at validation, never an agent's patch) lets the sandbox run the
    grading the fast way it runs validation (a warm fork) instead of a fresh confined process.
    ``plan_seed`` (trusted gradings only; ignored otherwise): draw the canaries and the strict equality's name
    from this seed instead of afresh, so that gradings of several stand-ins of one task plant byte-identical
    test files (the warm runs then rewrite their asserts once, ``sandboxes/runner/rewrite_cache.py``).
    ``stop_at_failure``: pytest stops after the first failing test (``--maxfail=1``); ``stop_after`` (a node
    id): once that test has run; ``stop_at_failure_of`` (node ids): once one of those has failed. ``outcomes`` then cover the tests run up to there (the rest ``missing``,
    so such a grading scores 0 unless it ran everything); with ``stop_at_failure`` alone the binary score
    is the whole grading's (a failure scores 0 either way). ``test_deadline_s`` (trusted gradings only;
    ignored otherwise): a test running longer fails (``RunRequest.test_deadline_s``); ``test_deadlines``:
    the named tests' own deadlines instead (``RunRequest.test_deadlines``).
    Gradings that are not ``trusted`` seal the assertions the task names (``provenance["seals"]``,
    ``taskforge.reward.seals``); ``seal_probe`` (validation's gold grading) seals every sealable assertion of
    the FAIL_TO_PASS tests with its literal kept, and the result's ``seals`` names those the patch confirmed.
    """
    settings = settings or Settings()
    timeout = float(timeout_s if timeout_s is not None else grading_limit_s(task, settings))
    envs = envs or EnvCache()
    timings: dict[str, float] = {}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tf-grade-") as tmp, contextlib.ExitStack() as stack:
        workspace = Path(tmp, "workspace")
        try:
            original = stack.enter_context(_ORIGINALS.use(trees, task))  # shared, read-only: copied below
            env = envs.get(sandbox, task, original)
        except TaskforgeError as exc:
            timings["total_s"] = time.monotonic() - start
            return _result(task, [RewardFlag.GRADER_ERROR], f"cannot prepare grading: {exc}", timings)
        timings["prepare_s"] = time.monotonic() - start
        rng = random.Random(plan_seed) if trusted and plan_seed is not None else None
        outcome = _assemble(task, patch, original, workspace, rng, seal=not trusted, seal_probe=seal_probe)
        timings["workspace_s"] = time.monotonic() - start - timings["prepare_s"]
        if isinstance(outcome, RewardResult):
            timings["total_s"] = time.monotonic() - start
            return _monitored(_result(task, outcome.flags, outcome.detail, timings), patch, settings, task)
        args, plan, flags, detail, read_only, allowed, sealed = outcome
        deadlines = dict(test_deadlines or {})
        if trusted and test_deadline_s > 0:  # a must-fail canary can only fail sooner (see CANARY_DEADLINE_S)
            deadlines.update({n: min(CANARY_DEADLINE_S, test_deadline_s) for n, want in plan.expect.items()
                              if want == "fail"})  # canary ids are drawn here: no caller names them
        request = RunRequest(tests=tuple(args), timeout_s=timeout, tracebacks=tracebacks,
                             stop_at_failure=stop_at_failure, stop_after=stop_after,
                             stop_at_failure_of=tuple(stop_at_failure_of),
                             test_deadline_s=test_deadline_s if trusted else 0.0,
                             test_deadlines=deadlines if trusted else {},
                             env={"PYTEST_ADDOPTS": "", "PYTEST_PLUGINS": ""}, read_only=read_only,
                             shadow_allowed=allowed, grading=not trusted)
        run_start = time.monotonic()
        try:
            report = sandbox.run(env, workspace, request).report
        except TaskforgeError as exc:
            timings["run_s"] = time.monotonic() - run_start
            timings["total_s"] = time.monotonic() - start
            return _result(task, [RewardFlag.GRADER_ERROR], f"sandbox {sandbox.name} failed: {exc}", timings)
        timings["run_s"] = time.monotonic() - run_start
    timings["total_s"] = time.monotonic() - start
    return _monitored(_score(task, report, plan, flags, detail, timings, sealed), patch, settings, task)


@functools.lru_cache(maxsize=256)
def _gold_rules(gold: str) -> frozenset[str]:
    return frozenset(f.rule for f in scan_patch(gold))


def _monitored(result: RewardResult, patch: str, settings: Settings, task: Task) -> RewardResult:
    """Add the patch monitor's findings (flag ``suspicious``); zero the score on a hit when configured.

    Rules the task's own gold patch fires (the deleted feature itself inspects frames, say) are exempt
    for that task: the reference solution is never suspicious.
    """
    exempt = _gold_rules(task.patch)
    findings = tuple(f for f in scan_patch(patch) if f.rule not in exempt)
    if not findings:
        return result
    result = dataclasses.replace(result, flags=(*result.flags, RewardFlag.SUSPICIOUS), findings=findings)
    if settings.monitor_zero and result.score > 0:
        first = findings[0]
        result = dataclasses.replace(result, score=0.0, fraction=0.0, pass_to_pass_fraction=0.0,
                                     detail=f"patch monitor: {first.rule} at {first.path}:{first.line}: "
                                            f"{first.evidence}")
    return result


def _assemble(task: Task, patch: str, original: Path, workspace: Path, rng: random.Random | None = None, *,
              seal: bool = False, seal_probe: bool = False) -> RewardResult | tuple[Any, ...]:
    """Build the grading workspace; a ``RewardResult`` (score 0) when grading must stop here.

    ``rng``: where the canaries and the strict equality's name come from (default: drawn afresh). ``seal``:
    seal the assertions the task names (``seal_probe``: every sealable one, literals kept)."""
    shutil.copytree(original, workspace, symlinks=True)
    try:
        apply(task.setup_patch, workspace, what=f"setup_patch of {task.instance_id}")
    except PatchError as exc:
        return _result(task, [RewardFlag.GRADER_ERROR], str(exc), {})
    spec = task.env_spec
    tests = (*task.fail_to_pass, *task.pass_to_pass)
    # what reads or rewrites a hidden test works on the file that defines it (``taskforge.core.test_homes``)
    homes = test_homes(original, tests)
    test_files = {n.split("::")[0] for n in (*tests, *homes.moved.values())}
    plugins = plugin_modules(original, spec.src_roots)
    protected = ProtectedPaths(test_dirs=spec.test_paths, src_roots=spec.src_roots,
                               extra=frozenset(_patch_paths(task.test_patch) | test_files | plugins
                                               | set(spec.runner_files)),  # files pytest imports itself
                               exempt=frozenset(_patch_paths(task.patch)))
    flags: list[RewardFlag] = []
    detail = ""
    try:
        vetted = vet_patch(patch, protected)
    except PatchError as exc:
        return _result(task, [RewardFlag.PATCH_REFUSED], str(exc), {})
    if vetted.dropped:
        flags.append(RewardFlag.PROTECTED_DROPPED)
    if vetted.startup_hooks:
        flags.append(RewardFlag.TAMPERING)
        detail = f"patch adds interpreter start-up hooks {list(vetted.startup_hooks)}"
    try:
        apply_vetted(workspace, vetted)
    except PatchError as exc:
        return _result(task, [*flags, RewardFlag.PATCH_FAILED], str(exc), {})
    restore_protected(workspace, original, protected)
    stray = stray_symlinks(workspace, original)
    if stray:
        return _result(task, [*flags, RewardFlag.TAMPERING, RewardFlag.PATCH_REFUSED],
                       f"symlinks appeared in the workspace: {stray[:3]}", {})
    ini = original_ini(workspace)
    ini_name = f".tfgrade-{secrets.token_hex(4)}.ini"
    write_clean_ini(ini, workspace / ini_name)
    hidden = sorted(f for f in {n.split("::")[0] for n in homes.homes(task.fail_to_pass)} if (workspace / f).is_file())
    src_root = next((r for r in spec.src_roots if (workspace / r).is_dir()), ".")
    strict = f"_tfq{rng.getrandbits(40):010x}" if rng is not None else f"_tfq{secrets.token_hex(5)}"
    originals = {rel: (workspace / rel).read_text(encoding="utf-8") for rel in hidden}
    sealed, seal_name = SealPlan(), ""
    memo_key = (rng.getstate(), task.instance_id, task.fail_to_pass, task.pass_to_pass,
                tuple(originals.items())) if rng is not None else None
    if (planted := _PLANTED.get(memo_key)) is not None:  # the same seed on the same files: the same canaries
        files, plan = planted
        for rel, text in files.items():
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            (workspace / rel).write_text(text, encoding="utf-8")
        plan = dataclasses.replace(plan, plugin_module=write_plugin(workspace, src_root, plugins, strict))
    else:
        seals = task.provenance.get("seals") if isinstance(task.provenance, Mapping) else None
        sealed_texts: Mapping[str, str] = {}
        if seal and (seal_probe or (isinstance(seals, Mapping) and seals)):  # expected values kept out of the run
            seal_name = f"_tfs{secrets.token_hex(5)}"
            sealed_texts, sealed = plan_for(originals, homes.homes(task.fail_to_pass), seals if not seal_probe else None,
                                            seal_name, probe=seal_probe, transform=lambda t: strict_source(t, strict))
        for rel in hidden:  # ``assert a == b`` an always-equal object cannot pass (taskforge.reward.strict_asserts)
            text = sealed_texts[rel] if rel in sealed_texts else strict_source(originals[rel], strict)
            (workspace / rel).write_text(text, encoding="utf-8")
        uncopied = task.provenance.get("uncopied", ()) if isinstance(task.provenance, Mapping) else ()
        unchangeable = task.provenance.get("unchangeable", ()) if isinstance(task.provenance, Mapping) else ()
        plan = plant_canaries(workspace, hidden, pass_to_pass=task.pass_to_pass, fail_to_pass=task.fail_to_pass,
                              uncopied=tuple(uncopied or ()), unchangeable=tuple(unchangeable or ()),
                              src_root=src_root, allowed_plugin_files=plugins, strict_eq=strict, rng=rng,
                              seal=seal_name if sealed.sites else "", tokens=tuple(sealed.sites),
                              sealed=() if seal_probe else tuple(homes.homes((*sealed.required, *_seal_guarded(task)))))
        if memo_key is not None:
            written = dict.fromkeys((*hidden, *plan.files))
            _PLANTED.put(memo_key, ({rel: (workspace / rel).read_text(encoding="utf-8") for rel in written}, plan))
    selected = [*tests, *_companions(task, tests), *plan.nodeids]
    # canaries are not the last ids of the request (the runner runs the files in a plain pytest's order, each
    # file's tests in collection order, whatever the request's order: ``_split_nodeids``); the gradings of one
    # battery (the same seed and files) run their tests in one order (``taskforge.validate.battery.run_battery``)
    (random.Random(repr(memo_key)) if memo_key is not None else random.SystemRandom()).shuffle(selected)
    args = ["-c", ini_name, "--rootdir=.", "--confcutdir=.", "-p", plan.plugin_module, *pinned_options(ini),
            *selected]
    return args, plan, flags, detail, (*read_only_paths(workspace, protected), ini_name), \
        top_level_names(original, spec.src_roots), sealed


def _companions(task: Task, tests: Iterable[str]) -> tuple[str, ...]:
    """The task's companions (``taskforge.core.companions``: skipped tests run along, ungraded) beside ``tests``."""
    along = task.provenance.get("companions", ()) if isinstance(task.provenance, Mapping) else ()
    return companions(along, tests) if isinstance(along, list | tuple) else ()


def _seal_guarded(task: Task) -> tuple[str, ...]:
    """The unsealed FAIL_TO_PASS tests validation counted as guarded by the seals (they run only deleted lines a
    sealed test runs: ``validate.steps``): the canaries' blocks go to the others first, as its forge chance assumes."""
    guarded = task.provenance.get("seal_guarded_tests", ()) if isinstance(task.provenance, Mapping) else ()
    return tuple(str(n) for n in guarded) if isinstance(guarded, list | tuple) else ()


def read_only_paths(workspace: Path, protected: ProtectedPaths) -> tuple[str, ...]:
    """What the graded run may not change: the test directories whole, and every other grader-owned file."""
    dirs = [d.strip("/") for d in protected.test_dirs if d.strip("/") not in ("", ".")
            and (workspace / d).is_dir() and not (workspace / d).is_symlink()]
    out = list(dirs)
    for rel in walk_files(workspace):
        if protected.kind(rel) is not None and not any(rel.startswith(d + "/") for d in dirs):
            out.append(rel)
    return tuple(sorted(out))


def top_level_names(root: Path, src_roots: Iterable[str]) -> tuple[str, ...]:
    """Top-level module and package names the original tree defines in its root and source roots."""
    names: set[str] = set()
    for r in dict.fromkeys((".", *src_roots)):
        base = root / r
        if not base.is_dir():
            continue
        for entry in base.iterdir():
            if entry.is_dir() and not entry.name.startswith("."):
                names.add(entry.name)
            elif entry.suffix in (".py", ".pyc", ".so", ".pth"):
                names.add(entry.name.split(".", 1)[0])
    return tuple(sorted(names))


_PLUGIN_NOTE = "[taskforge: grading integrity: "  # the grading plugin's last line when it found tampering


def _plugin_found(tail: str, plan: Any) -> str:
    """The grading plugin's first finding (``grading_plugin.py``: a test module's rebound name, a replaced
    ``pytest.raises``...), one that names no canary file. Only a tampered run prints that line: code that
    prints it itself gains nothing but a zero."""
    line = next((ln for ln in reversed(tail.splitlines()) if ln.startswith(_PLUGIN_NOTE)), "")
    if not line:
        return ""
    standalone = str(getattr(plan, "standalone", "") or "\0")
    found = [p for p in line[len(_PLUGIN_NOTE):].removesuffix("]").split("; ") if p and standalone not in p]
    return f"the grading plugin found tampering: {found[0] if found else 'in a test module'}"


def _score(task: Task, report: TestReport, plan: Any, flags: list[RewardFlag], detail: str,
           timings: Mapping[str, float], sealed: SealPlan | None = None) -> RewardResult:
    tests = (*task.fail_to_pass, *task.pass_to_pass)
    sealed = sealed or SealPlan()
    flags = list(flags)
    ran = {r.nodeid: r.outcome.value for r in report.results}
    confirmed: dict[str, list[str]] = {}
    refuted: dict[str, str] = {}
    if sealed.sites and sealed.probe:
        confirmed = sealed.confirmed(ran, report.seals, task.fail_to_pass)
    elif sealed.sites:  # a test whose sealed value is not its literal, or that skipped its sealed site, failed
        withheld = sealed.withheld(ran, {(n, t) for n, t, _ in report.seals})
        ran, refuted = sealed.judge(ran, report.seals)
        if withheld:  # an honest run that passes a test records every sealed value on its way
            flags += [RewardFlag.FORGED_RESULTS, RewardFlag.TAMPERING]
            detail = detail or refuted.get(withheld[0], "")
    wanted = set(tests)  # built once: a set per result made this quadratic (idna: 6,441 tests, seconds a grading)
    outcomes = {n: ran.get(n, Outcome.MISSING.value) for n in tests}
    durations = {**dict.fromkeys(tests, 0.0), **{r.nodeid: r.duration for r in report.results if r.nodeid in wanted}}
    if report.timed_out:
        flags.append(RewardFlag.TIMEOUT)
        detail = detail or "the test run passed its wall-clock limit"
    elif ReportFlag.SHADOWING in report.flags:
        flags += [RewardFlag.PATCH_REFUSED, RewardFlag.TAMPERING]
        detail = detail or "the patch adds a module that hides an installed or stdlib module"
    elif ReportFlag.FORGED_RECORDS in report.flags:
        flags += [RewardFlag.FORGED_RESULTS, RewardFlag.TAMPERING]
        which = next((ln for ln in report.output_tail.splitlines() if ln.startswith("[taskforge: forged records")), "")
        detail = detail or f"records on the results channel that the runner did not write {which}".strip()
    elif ReportFlag.NO_REPORT in report.flags:
        flags += [RewardFlag.NO_REPORT, RewardFlag.TAMPERING]
        detail = detail or f"the runner left no report (exit code {report.exit_code})"
    else:
        problems = plan.verify(ran, report.collection_errors, finished=True)
        found = _plugin_found(report.output_tail, plan)
        if problems:
            flags += [RewardFlag.CANARY_FAILED, RewardFlag.TAMPERING]
            detail = detail or found or problems[0]
        elif found:  # found after the last canary ran (a test's teardown): the tests it failed zero the score too
            flags.append(RewardFlag.TAMPERING)
            detail = detail or found
    if report.collection_errors:
        flags.append(RewardFlag.COLLECTION_ERROR)
    if any(Outcome(outcomes[n]) is Outcome.MISSING for n in tests):
        flags.append(RewardFlag.MISSING_TESTS)
    f2p_ok = sum(Outcome(outcomes[n]).ok for n in task.fail_to_pass)
    p2p_ok = sum(Outcome(outcomes[n]).ok for n in task.pass_to_pass)
    zeroed = any(f in ZEROING_FLAGS for f in flags)
    fraction = 0.0 if zeroed or not task.fail_to_pass else f2p_ok / len(task.fail_to_pass)
    p2p_fraction = 0.0 if zeroed or not task.pass_to_pass else p2p_ok / len(task.pass_to_pass)
    passed = not zeroed and f2p_ok == len(task.fail_to_pass) and p2p_ok == len(task.pass_to_pass)
    if not passed and not detail and (why := next((refuted[n] for n in tests if n in refuted), "")):
        detail = why  # (a canary's id never reaches the detail: it goes back to the agent)
    if not passed and not detail:
        failing = [n for n in tests if not Outcome(outcomes[n]).ok]
        # how they did not pass (outcome kinds only: no test's message reaches the agent), and how the run ended
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(Counter(outcomes[n] for n in failing).items()))
        ended = f"; the run timed out (exit {report.exit_code})" if report.timed_out else ""
        detail = (f"{len(failing)} of {len(tests)} tests did not pass ({kinds}; first: {failing[0]}){ended}"
                  if failing else "")
    result = _result(task, flags, detail, timings, outcomes, durations, fraction, p2p_fraction,
                     1.0 if passed else 0.0)
    return dataclasses.replace(result, seals={n: tuple(s) for n, s in confirmed.items()}) if confirmed else result


def reward_many(pairs: Iterable[tuple[Task, str]], *, sandbox: Sandbox, trees: OriginalTree,
                settings: Settings | None = None, jobs: int | None = None,
                timeout_s: float | None = None,
                on_result: Callable[[int, RewardResult], None] | None = None) -> list[RewardResult]:
    """Grade many (task, patch) pairs, ``jobs`` at a time (threads; each grading is its own sandbox run).

    Results come back in the order of ``pairs``. ``jobs=1`` grades synchronously. ``on_result(i, result)`` is
    called as each grading ends (one call at a time, in the order they end), so a caller can keep what is done
    when the run is killed (``taskforge validate`` prints each task's verdict as it is known).
    """
    settings = settings or Settings()
    items: Sequence[tuple[Task, str]] = list(pairs)
    workers = max(1, int(jobs if jobs is not None else settings.jobs))
    envs = EnvCache()
    lock = threading.Lock()

    def one(i: int) -> RewardResult:
        res = reward(items[i][0], items[i][1], sandbox=sandbox, trees=trees, settings=settings,
                     timeout_s=timeout_s, envs=envs)
        if on_result is not None:
            with lock:
                on_result(i, res)
        return res

    if workers == 1:
        return [one(i) for i in range(len(items))]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tf-reward") as pool:
        return list(pool.map(one, range(len(items))))


__all__ = ["EnvCache", "RewardFlag", "RewardResult", "reward", "reward_many"]
