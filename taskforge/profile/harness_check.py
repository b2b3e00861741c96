"""The profile's grading-harness check: the original repository graded once, as every task will be.

A baseline run is a plain pytest run; a task is graded through the reward path
(``taskforge.reward.reward.reward``): a fresh grading workspace, the test directories read-only, a clean
ini, canaries planted in the hidden test files, the grading plugin, strict equality in the hidden tests,
``PYTEST_CURRENT_TEST`` unset. A test that passes plainly and fails there is no usable PASS_TO_PASS or
FAIL_TO_PASS test: every candidate that relies on it is rejected after a full pipeline of sandbox runs
(``suite_red_after_deletion`` on the empty patch, ``gold_failed`` on the gold one).

``grading_check(...)`` grades the original (empty patch, nothing deleted) with every reliable test in the
request, the way the gold patch is graded (untrusted: a fresh confined run), every hideable one as
FAIL_TO_PASS, so its file gets the canaries and the strict equality a hidden test file gets; the other
reliable tests (doctests outside test files) as PASS_TO_PASS, and the skipped tests beside them run along,
ungraded (``taskforge.core.companions``: wcmatch's case tables set state in rows that skip). One run of the
suite, killed after the validator's run limit (``taskforge.validate.from_baseline.run_limit_s``). Reliable tests that do not pass
there leave ``Baseline.passed`` for ``Baseline.grading_failed`` (``Baseline.with_grading_check``).

It never raises and never takes the baseline apart: when the run itself does not give a verdict (the
sandbox fails, the run times out or reports nothing, not a single test passes) the check is recorded as
``status="error"`` with one line saying why, and the baseline stays as it was; when the original itself
trips the grading's integrity checks (canaries, the grading plugin: it then fails every later test) it is
``status="flagged"``, nothing is dropped, and the line says that tasks whose hidden tests share the file it
happened in will fail their gold grading (the check plants canaries in every test file at once, a task's
gradings only in its own hidden files: natsort's check was flagged by one file, and its tasks all hold).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from sandboxes.protocol import Sandbox
from taskforge.core.companions import companions
from taskforge.core.environment import PreparedEnv
from taskforge.core.settings import Settings
from taskforge.core.task import Difficulty, Task
from taskforge.profile.baseline import Baseline, GradingCheck

# flags under which the outcomes say nothing about single tests: the run itself gave no verdict
_NO_VERDICT = ("timeout", "grader_error", "no_report", "patch_refused", "forged_results")
FIRST_IDS = 10


def check_task(repo_dir: Path, env: PreparedEnv, baseline: Baseline, *, name: str = "") -> Task:
    """The task that grades the original: nothing deleted, every reliable test in the request."""
    from taskforge.validate.jobs import hideable

    reliable = sorted(baseline.reliable)
    f2p = tuple(n for n in reliable if hideable(n, env.spec))
    f2p_set = set(f2p)
    p2p = tuple(n for n in reliable if n not in f2p_set)
    label = name or Path(repo_dir).name
    along = companions(baseline.skipped, reliable)  # run along, ungraded (taskforge.core.companions)
    return Task(instance_id=f"{label}__grading-check", repo=label, source=str(repo_dir), base_commit="",
                version="", created_at="", strategy="none", entities=(), setup_patch="", patch="",
                test_patch="", problem_statement="", fail_to_pass=f2p, pass_to_pass=p2p, env_spec=env.spec,
                difficulty=Difficulty(0, 0, 0, 0, 0, 0, 0, 0, len(f2p), 0.0), env_frozen=env.frozen,
                provenance={"companions": list(along)} if along else {})


def grading_check(repo_dir: Path, env: PreparedEnv, baseline: Baseline, sandbox: Sandbox, settings: Settings,
                  *, name: str = "") -> tuple[GradingCheck, frozenset[str]]:
    """Grade the original once (module docstring): the check, and the reliable tests that did not pass."""
    start = time.monotonic()
    if not baseline.reliable:
        return GradingCheck("passed", detail="no reliable test to grade"), frozenset()
    try:
        from taskforge.reward.reward import reward
        from taskforge.reward.workspace import DirectoryTrees
        from taskforge.validate.from_baseline import run_limit_s
        from taskforge.validate.worker import FixedEnv

        task = check_task(repo_dir, env, baseline, name=name)
        res = reward(task, "", sandbox=sandbox, trees=DirectoryTrees(Path(repo_dir)), settings=settings,
                     timeout_s=run_limit_s(baseline, settings), envs=FixedEnv(env),  # type: ignore[arg-type]
                     tracebacks=False)
    except Exception as exc:  # the check is advisory: a bug or a broken sandbox keeps the baseline
        return GradingCheck("error", detail=f"{type(exc).__name__}: {str(exc)[:300]}",
                            seconds=round(time.monotonic() - start, 3)), frozenset()
    return judge(task, res, time.monotonic() - start)


def judge(task: Task, res: Any, seconds: float) -> tuple[GradingCheck, frozenset[str]]:
    """The check's verdict from the reward's result ``res`` on ``task`` (``check_task``)."""
    graded = (*task.fail_to_pass, *task.pass_to_pass)
    seconds = round(seconds, 3)
    flags = [str(getattr(f, "value", f)) for f in res.flags]
    detail = "; ".join(x for x in (res.detail, f"flags {flags}" if flags else "") if x)[:400]
    no_verdict = [f for f in flags if f in _NO_VERDICT]
    failed = frozenset(n for n in graded if res.outcomes.get(n) != "passed")
    if no_verdict or len(failed) == len(graded):
        why = f"the grading run gave no verdict ({no_verdict[0]})" if no_verdict else "no test passed"
        return GradingCheck("error", graded=len(graded), detail=f"{why}: {detail}"[:400], seconds=seconds), frozenset()
    if "tampering" in flags:  # the grading plugin fails every test once it finds something: outcomes say nothing
        return GradingCheck("flagged", graded=len(graded), failed=len(failed), first=tuple(sorted(failed)[:FIRST_IDS]),
                            detail=f"the original trips the grading's integrity checks: {detail}"[:400],
                            seconds=seconds), frozenset()
    counts = Counter(str(res.outcomes.get(n, "missing")) for n in failed)
    return GradingCheck("dropped" if failed else "passed", graded=len(graded), failed=len(failed),
                        first=tuple(sorted(failed)[:FIRST_IDS]), outcomes=dict(counts.most_common()),
                        detail=detail if failed else "", seconds=seconds), failed


def checked_baseline(repo_dir: Path, env: PreparedEnv, baseline: Baseline, sandbox: Sandbox, settings: Settings,
                     *, name: str = "") -> Baseline:
    """``baseline`` with the check recorded and the tests that fail only under grading dropped."""
    check, failed = grading_check(repo_dir, env, baseline, sandbox, settings, name=name)
    return baseline.with_grading_check(check, failed)


__all__ = ["check_task", "checked_baseline", "grading_check", "judge"]
