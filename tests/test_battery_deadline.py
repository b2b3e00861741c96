"""A stand-in that makes the code under test loop costs one test deadline, not the grading's time limit.

``minipkg.walk.cycle_len`` loops until ``next_index`` wraps to 0; with ``next_index`` stood in for by
``None`` it never does. Before the deadline (``RunRequest.test_deadline_s``), that stand-in's grading ran
into the battery's limit (at least 30 s; markdown 3.11.3's ListIndentProcessor: 4 gradings x 47 s); with it
the looping test fails after ``BATTERY_DEADLINE_FLOOR_S`` and is the witness that ends the grading.
"""

from __future__ import annotations

import pytest
from generate_fixtures import make_mini_project

from generators.candidates import Candidate
from sandboxes.fakes import HostSandbox
from taskforge.core.settings import Settings
from taskforge.pipeline.generate import ProfileJob, profile_source
from taskforge.validate.steps import BATTERY_DEADLINE_FLOOR_S, CandidateJob, validate_candidate

WALK = '''\
"""Walking a ring of positions."""


def next_index(i, n):
    """The position after ``i`` on a ring of ``n`` positions."""
    j = i + 1
    if j >= n:
        j = 0
    return j


def cycle_len(n):
    """Steps from position 0 back to position 0."""
    i = next_index(0, n)
    steps = 1
    while i != 0:
        i = next_index(i, n)
        steps += 1
    return steps
'''

TEST_WALK = '''\
from minipkg.walk import cycle_len, next_index


def test_next_index():
    next_index(1, 3)  # every stand-in passes this one: the witness is test_cycle_len, whatever the order


def test_cycle_len():
    assert cycle_len(3) == 3
    assert cycle_len(1) == 1
'''


@pytest.mark.slow
def test_a_looping_stand_in_fails_at_the_deadline_and_the_task_is_accepted(tmp_path) -> None:
    """The battery's test order is drawn per validation: with a test_next_index that always_equal fails, the
    witness was test_next_index whenever it ran first, ``none`` stopped after it and never looped (the test
    failed about one run in three). Every stand-in passes test_next_index now, so the loop is reached."""
    src = make_mini_project(tmp_path / "minipkg", {"minipkg/walk.py": WALK, "tests/test_walk.py": TEST_WALK})
    settings = Settings.load({"work_dir": str(tmp_path / "work"), "baseline_runs": 2, "test_timeout_s": 300})
    profile = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))
    cand = Candidate("stub:minipkg.walk.next_index", "stub", "minipkg.walk.next_index",
                     ("tests/test_walk.py::test_next_index", "tests/test_walk.py::test_cycle_len"), 1.0, "")
    res = validate_candidate(CandidateJob(profile.profile_dir, cand, settings.to_dict(), sandbox=HostSandbox()))
    assert res.task is not None, res.rejected
    battery = {r.check: r for r in res.task.validation if r.check.startswith("battery_")}
    none = next(r for name, r in battery.items() if name.startswith("battery_none"))
    assert none.outcomes.get("tests/test_walk.py::test_cycle_len") == "failed", battery  # the loop, cut
    assert none.seconds < BATTERY_DEADLINE_FLOOR_S + 15, battery
    assert sum(r.seconds for r in battery.values()) < 60, battery


RETRY = '''\
"""Retrying a step until it works."""


def step(v):
    """One step: the value doubled."""
    return [x * 2 for x in v]
'''

TEST_RETRY = '''\
from minipkg.retry import step


def test_step():
    assert step([1, 2]) == [2, 4]


def test_retry_until_it_works():
    got = None
    while got is None:  # pyrsistent's test_segfault_issue_52: retry on an error, forever once step is gone
        try:
            got = step([3])
        except Exception:
            continue
    assert got == [6]
'''


@pytest.mark.slow
def test_a_test_that_loops_on_the_broken_code_fails_at_its_deadline_not_the_run_limit(tmp_path) -> None:
    """pyrsistent 0.20.0: with ``transform`` stubbed, ``test_segfault_issue_52`` retries forever; the early
    run (and the empty-patch grading) ran into the 77 s run limit, the longest stretch without a verdict.

    The empty-patch grading also runs the test's 15 changed copies (``canaries.TWIN_MAX``: its one block), which
    loop too: each fails at ``CANARY_DEADLINE_S``, not at the test's own deadline (CI: two looping copies took
    that grading to 20.4 s of the 20 s this test allowed; 15 at 5 s would take 80 s)."""
    from taskforge.reward.reward import CANARY_DEADLINE_S

    src = make_mini_project(tmp_path / "minipkg", {"minipkg/retry.py": RETRY, "tests/test_retry.py": TEST_RETRY})
    settings = Settings.load({"work_dir": str(tmp_path / "work"), "baseline_runs": 2, "test_timeout_s": 300,
                              "battery": False, "run_limit_margin_s": 240})  # a limit far from any deadline
    profile = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))
    cand = Candidate("stub:minipkg.retry.step", "stub", "minipkg.retry.step",
                     ("tests/test_retry.py::test_step", "tests/test_retry.py::test_retry_until_it_works"), 1.0, "")
    res = validate_candidate(CandidateJob(profile.profile_dir, cand, settings.to_dict(), sandbox=HostSandbox()))
    assert res.task is not None, res.rejected
    assert "tests/test_retry.py::test_retry_until_it_works" in res.task.fail_to_pass
    early = {r.check: r.seconds for r in res.task.validation if r.check == "early_broken"}
    assert early and all(s < BATTERY_DEADLINE_FLOOR_S + 15 for s in early.values()), early
    budget = BATTERY_DEADLINE_FLOOR_S + 15 * CANARY_DEADLINE_S + 30  # one deadline, 15 canary deadlines, slack
    slow = {r.check: r.seconds for r in res.task.validation if r.seconds > budget}
    assert not slow, slow


def test_each_slow_test_keeps_its_own_deadline_and_the_rest_share_the_90th_percentiles() -> None:
    """soupsieve 4.1.4: one deadline over the slowest hidden test (3.8 s) gave a 0.01 s test 43 s to loop."""
    from types import SimpleNamespace

    from taskforge.validate.steps import BATTERY_DEADLINE_FACTOR, _Validation

    durations = {f"t.py::test_{i}": 0.01 for i in range(20)} | {"t.py::test_slow": 3.8, "t.py::test_huge": 100.0}
    fake = SimpleNamespace(profile=SimpleNamespace(baseline=SimpleNamespace(durations=durations)), limit_s=300.0)
    default, own = _Validation.test_deadlines(fake, tuple(durations))  # type: ignore[arg-type]
    assert default == BATTERY_DEADLINE_FLOOR_S + BATTERY_DEADLINE_FACTOR * 0.01
    assert own == {"t.py::test_slow": BATTERY_DEADLINE_FLOOR_S + BATTERY_DEADLINE_FACTOR * 3.8,
                   "t.py::test_huge": 0.0}  # past the run's limit: no deadline, the limit holds


def test_an_empty_patch_grading_flagged_with_every_test_as_expected_has_its_own_reason() -> None:
    """six 1.17.0 and ordered-set 4.1.0: a canary failure in the empty-patch grading was filed as
    ``suite_red_after_deletion`` with "0 PASS_TO_PASS tests fail", hiding the canary bugs in the funnel."""
    from types import SimpleNamespace

    from taskforge.core.outcomes import RejectReason
    from taskforge.reward.result import RewardFlag
    from taskforge.validate.steps import _Validation

    fake = SimpleNamespace(reject=lambda reason, detail="": (reason, detail))
    graded = SimpleNamespace(fail_to_pass=("t.py::test_f",), pass_to_pass=("t.py::test_p",))
    res = SimpleNamespace(flags=(RewardFlag.CANARY_FAILED, RewardFlag.TAMPERING), score=0.0, detail="canary x",
                          outcomes={"t.py::test_f": "failed", "t.py::test_p": "passed"})
    reason, detail = _Validation._contract_reject(fake, "empty_patch", 1, res, graded)  # type: ignore[arg-type]
    assert reason is RejectReason.EMPTY_PATCH_FLAGGED and "canary_failed" in detail
    res.outcomes["t.py::test_p"] = "failed"
    assert _Validation._contract_reject(fake, "empty_patch", 1, res, graded)[0] \
        is RejectReason.SUITE_RED_AFTER_DELETION  # type: ignore[arg-type]


@pytest.mark.parametrize(("check", "hidden_s", "kept"), [
    ("passed", 30.0, False),  # most of the suite, vouched for by the grading check: left out
    ("dropped", 30.0, False),
    ("error", 30.0, True),  # nothing vouches for them
    (None, 30.0, True),
    ("passed", 1.5, True),  # cheap: graded anyway (one more canary draw on the gold code)
])
def test_the_first_gold_grading_leaves_out_a_big_hidden_file_the_grading_check_vouched_for(
        check: str | None, hidden_s: float, kept: bool) -> None:
    """pyparsing 3.3.3: tests/test_unit.py holds ~1,900 of its 2,094 tests, so the first gold grading of every
    candidate with a hidden test there ran ~the whole suite (38 s) for the hidden file's PASS_TO_PASS tests."""
    from types import SimpleNamespace

    from taskforge.core.settings import Settings
    from taskforge.core.test_homes import Homes
    from taskforge.profile.baseline import Baseline, GradingCheck
    from taskforge.validate.steps import _Validation

    p2p = tuple(f"tests/test_unit.py::test_{i}" for i in range(30))
    durations = {**dict.fromkeys(p2p, hidden_s / len(p2p)), **{f"tests/test_other.py::test_{i}": 0.1 for i in range(40)}}
    baseline = Baseline(runs=1, passed=frozenset(durations), failed=frozenset(), flaky=frozenset(),
                        skipped=frozenset(), durations=durations,
                        grading_check=GradingCheck(check) if check else None)
    fake = SimpleNamespace(profile=SimpleNamespace(baseline=baseline), settings=Settings(), naive=False)
    task = SimpleNamespace(pass_to_pass=(*p2p, "tests/test_other.py::test_0"))
    got = _Validation._hidden_files_p2p(fake, task, {"tests/test_unit.py"}, Homes())  # type: ignore[arg-type]
    assert got == (p2p if kept else ())
