"""What makes validation cheaper keeps its verdicts: the battery's early stop, one canary plan per battery."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from reward_fixtures import MINILIB, MINILIB_SPEC, build_stub_task, write_tree

from taskforge.core.patches import read_tree
from taskforge.core.task import Task
from taskforge.reward.reward import _assemble
from taskforge.reward.workspace import DirectoryTrees, walk_files
from taskforge.validate.battery import STAND_INS, BatteryResult, run_battery


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, Path]:
    base = tmp_path_factory.mktemp("minilib")
    orig = write_tree(base / "orig", MINILIB)
    return build_stub_task(orig, base, module="minilib/text.py", function="shout", spec=MINILIB_SPEC,
                           repo="minilib"), orig


def _grader(scoring: str, calls: list[str]):
    def grade(patch: str) -> SimpleNamespace:
        calls.append(patch)
        hit = scoring == "always_equal" and "_TfAnything()\n" in patch and "_tf_ast" not in patch
        return SimpleNamespace(score=1.0 if hit else 0.0, outcomes={})
    return grade


def test_the_battery_stops_once_a_deciding_stand_in_scores(task: tuple[Task, Path]) -> None:
    t, orig = task
    calls: list[str] = []
    res = run_battery(t, orig, _grader("always_equal", calls), stop_when_cheatable=True)
    assert len(calls) == 1 and res.cheats == ("always_equal",) and res.cheatable
    calls.clear()
    full = run_battery(t, orig, _grader("always_equal", calls))  # the default grades every stand-in
    assert len(calls) == len(STAND_INS) and full.cheatable and full.cheats == res.cheats
    calls.clear()
    run_battery(t, orig, _grader("always_equal", calls), stop_when_cheatable=True,
                          deciding=[n for n in STAND_INS if n != "always_equal"])
    assert len(calls) == len(STAND_INS)  # a score of a stand-in that decides nothing never stops it


def _test_files(task: Task, orig: Path, dest: Path, rng: random.Random | None) -> tuple[dict[str, str | None], str]:
    (dest / "original").mkdir(parents=True)
    DirectoryTrees(orig).materialize(task, dest / "original")
    out = _assemble(task, "", dest / "original", dest / "ws", rng)
    assert isinstance(out, tuple)
    plan = out[1]
    assert (dest / "ws" / f"{plan.plugin_module}.py").is_file()
    files = [p for p in walk_files(dest / "ws") if p.startswith("tests/")]
    return read_tree(dest / "ws", files), plan.plugin_module


def test_one_plan_seed_plants_byte_identical_test_files_and_fresh_draws_differ(task: tuple[Task, Path],
                                                                                  tmp_path: Path) -> None:
    t, orig = task
    a, plugin_a = _test_files(t, orig, tmp_path / "a", random.Random(7))
    b, plugin_b = _test_files(t, orig, tmp_path / "b", random.Random(7))  # the second from the stored plan
    c, _ = _test_files(t, orig, tmp_path / "c", None)
    assert a == b and plugin_a != plugin_b  # the grading plugin's module name is always drawn afresh
    assert a != c  # without a seed: canaries and the strict equality's name drawn afresh
    d, _ = _test_files(t, orig, tmp_path / "d", random.Random(8))
    assert d != a


OUTCOMES = '''\
import pytest


@pytest.fixture
def broken():
    raise RuntimeError("setup fails")


def test_fails():
    assert 1 == 2


def test_errors_in_setup(broken):
    pass


@pytest.mark.xfail(strict=True)
def test_xfails():
    raise ValueError("expected")


@pytest.mark.xfail(strict=True)
def test_xpasses_strictly():
    pass


def test_skips():
    pytest.skip("no")


def test_passes():
    pass
'''


def test_unformatted_failures_give_the_outcomes_formatted_ones_give(tmp_path: Path) -> None:
    from sandboxes.fakes import SubprocessSandbox
    from sandboxes.protocol import RunRequest
    from taskforge.core.environment import EnvSpec

    ws = write_tree(tmp_path / "ws", {"tests/test_outcomes.py": OUTCOMES})
    box = SubprocessSandbox()
    env = box.prepare(EnvSpec("demo", "3.11", "", test_paths=("tests",)), ws)
    plain, brief = (box.run(env, ws, RunRequest(tests=(), timeout_s=120, tracebacks=tb)).report for tb in (True, False))
    assert plain.outcomes() == brief.outcomes() and len(brief.outcomes()) == 6
    assert "RuntimeError: setup fails" in plain.output_tail
    assert "setup fails" not in brief.output_tail  # formatted, its summary line would quote the message


def test_bench_validation_cost_splits_test_time_per_check_and_rejection(tmp_path: Path) -> None:
    import json

    from taskforge.bench.validation_cost import corpus_cost

    journal = tmp_path / "packages/demo/dataset/.journal/demo"
    journal.mkdir(parents=True)
    runs = [{"check": "early_broken", "seconds": 1.0}, {"check": "empty_patch", "seconds": 2.0},
            {"check": "battery_none", "seconds": 0.5}, {"check": "battery_skip", "seconds": 0.5}]
    (journal / "a.json").write_text(json.dumps({"task": {"validation": json.dumps(runs)}, "test_seconds": 4.0}))
    (journal / "b.json").write_text(json.dumps({"rejected": {"reason": "gold_failed"}, "test_seconds": 2.0}))
    profile = tmp_path / "work/profiles/p1"
    profile.mkdir(parents=True)
    (profile / "profile.json").write_text(json.dumps({"snapshot": {"name": "demo", "version": "1"}}))
    (profile / "baseline.json").write_text(json.dumps({"run_seconds": [9.0, 2.0, 2.0, 2.0]}))
    cost = corpus_cost(tmp_path)
    demo = cost["demo"]
    assert demo["suite_s"] == 2.0 and demo["accepted"] == 1 and demo["decided"] == 2
    assert demo["suite_eq_per_task"] == 3.0  # (4 + 2) s / 2 s / 1 task
    assert demo["accepted_by_check"] == {"empty_patch": 1.0, "early_broken": 0.5, "battery": 0.5}
    assert demo["runs_per_task"]["battery"] == 2 and demo["rejected_by_reason"] == {"gold_failed": 1.0}
    assert cost["all"] == {"accepted": 1, "suite_eq_per_task": 3.0}


def _modelled(task: Task, orig: Path, passes: dict[str, set[str]], calls: list[tuple[str, str]]):
    """A grader whose stand-in ``name`` passes the hidden tests ``passes[name]``, run in F2P order; the
    outcomes end at the first failure with ``stop_at_failure`` (pytest's ``--maxfail=1``), after the test
    ``stop_after`` with that, and xfail/skip stand-ins fail nothing (their tests xfail or skip)."""
    from taskforge.validate.battery import stand_in_patches

    name_of = {p: n for n, p in stand_in_patches(task, orig, STAND_INS)[0].items()}

    def grade(patch: str, stop_at_failure: bool = False, stop_after: str = "",
              stop_at_failure_of: tuple[str, ...] = ()) -> SimpleNamespace:
        name = name_of[patch]
        calls.append((name, "first_failure" if stop_at_failure or stop_at_failure_of
                      else "after_witness" if stop_after else ""))
        outcomes: dict[str, str] = {}
        for t in task.fail_to_pass:
            outcomes[t] = "passed" if t in passes.get(name, set()) else "xfailed" if name in ("xfail", "skip") \
                else "failed"
            if (stop_at_failure and outcomes[t] == "failed") or t == stop_after \
                    or (outcomes[t] != "passed" and t in stop_at_failure_of):
                break
        outcomes = {t: outcomes.get(t, "missing") for t in task.fail_to_pass}
        score = float(all(o == "passed" for o in outcomes.values()))
        return SimpleNamespace(score=score, outcomes=outcomes)
    return grade


def test_first_failure_battery_proves_not_cheatable_with_one_short_run_per_stand_in(
        task: tuple[Task, Path]) -> None:
    import dataclasses

    t, orig = task
    t = dataclasses.replace(t, fail_to_pass=("tests/t.py::a", "tests/t.py::b", "tests/t.py::c"))
    calls: list[tuple[str, str]] = []
    seen: list[tuple[str, str, object]] = []
    passes = {"always_equal": {"tests/t.py::a"}, "none": {"tests/t.py::c"}}
    res = run_battery(t, orig, _modelled(t, orig, passes, calls), stop_when_cheatable=True,
                      first_failure=True, record=lambda n, stop, g: seen.append((n, stop, g)))
    # always_equal stops at b (its first failure); every other stand-in fails b: proven, no whole grading
    assert not res.cheatable
    assert calls == [("always_equal", "first_failure"), *[(n, "after_witness") for n in list(STAND_INS)[1:]]]
    assert [(n, s) for n, s, _ in seen] == calls


def test_a_stand_in_that_passes_the_witness_gets_a_fresh_one_not_whole_gradings(task: tuple[Task, Path]) -> None:
    """attrs 26.1.0, ``module:attr._funcs``: echo_first passed the test always_equal failed first, and every
    later stand-in was graded whole (214 s over 88 hypothesis tests). Now echo_first runs up to its first
    failure among the tests nobody passed, always_equal up to that test, and the rest stop after it."""
    import dataclasses

    t, orig = task
    ids = ("tests/t.py::a", "tests/t.py::b", "tests/t.py::c", "tests/t.py::d")
    t = dataclasses.replace(t, fail_to_pass=ids)
    calls: list[tuple[str, str]] = []
    passes = {"always_equal": {"tests/t.py::a"}, "echo_first": {"tests/t.py::a", "tests/t.py::b"}}
    res = run_battery(t, orig, _modelled(t, orig, passes, calls), stop_when_cheatable=True, first_failure=True)
    assert not res.cheatable
    assert all(stop for _, stop in calls), calls  # no whole grading
    names = list(STAND_INS)
    at = names.index("echo_first")
    assert calls[:at + 1] == [("always_equal", "first_failure"), *[(n, "after_witness") for n in names[1:at + 1]]]
    # echo_first passed b: it runs to its first failure among c, d (c), the stand-ins before it up to c
    assert calls[at + 1] == ("echo_first", "first_failure")
    assert calls[at + 2:at + 2 + at] == [(n, "after_witness") for n in names[:at]]
    assert calls[at + 2 + at:] == [(n, "after_witness") for n in names[at + 1:]]


def test_first_failure_battery_gives_the_whole_battery_verdict(task: tuple[Task, Path]) -> None:
    """Random pass sets per stand-in: the verdict with truncated runs first is the whole gradings' verdict."""
    import dataclasses

    t, orig = task
    ids = tuple(f"tests/t.py::t{i}" for i in range(4))
    t = dataclasses.replace(t, fail_to_pass=ids)
    rng = random.Random(7)
    deciding = [n for n in STAND_INS if n != "frame_oracle"]
    redone = 0
    for _ in range(60):
        passes = {n: {i for i in ids if rng.random() < 0.45} for n in STAND_INS}
        quick_calls: list[tuple[str, str]] = []
        whole = run_battery(t, orig, _modelled(t, orig, passes, []), stop_when_cheatable=True, deciding=deciding)
        quick = run_battery(t, orig, _modelled(t, orig, passes, quick_calls), stop_when_cheatable=True,
                            deciding=deciding, first_failure=True)
        def verdict(r: BatteryResult) -> bool:  # as validation reads it: frame_oracle decides nothing
            return BatteryResult(ids, {k: v for k, v in r.scores.items() if k in deciding}).cheatable
        assert verdict(quick) == verdict(whole), passes
        redone += any(not stop for _, stop in quick_calls)
    assert 0 < redone < 60  # both paths were taken


def test_a_stand_in_whose_run_never_reaches_the_witness_holds_it(task: tuple[Task, Path]) -> None:
    """tenacity 9.2.1, ``stub:tenacity.stop.stop_after_attempt``: the xfail stand-in's gradings reported every
    hidden test missing; the battery took that for a pass of the witness, found no fresh one, and graded all
    five stand-ins whole (60 s of a 97 s stretch without a verdict). Not reached is not passed."""
    import dataclasses

    t, orig = task
    ids = ("tests/t.py::a", "tests/t.py::b", "tests/t.py::c")
    t = dataclasses.replace(t, fail_to_pass=ids)
    calls: list[tuple[str, str]] = []
    inner = _modelled(t, orig, {"always_equal": {"tests/t.py::a"}}, calls)

    def grade(patch: str, **kw: object) -> SimpleNamespace:
        res = inner(patch, **kw)
        if calls[-1][0] == "xfail":  # the run ends before any hidden test reports
            res = SimpleNamespace(score=0.0, outcomes=dict.fromkeys(ids, "missing"))
        return res

    res = run_battery(t, orig, grade, stop_when_cheatable=True, first_failure=True)
    assert not res.cheatable
    assert all(stop for _, stop in calls), calls  # no whole grading
    assert calls == [("always_equal", "first_failure"), *[(n, "after_witness") for n in list(STAND_INS)[1:]]]


@pytest.mark.slow
def test_the_first_empty_patch_grading_leaves_out_unaffected_tests_the_gold_grading_ran(tmp_path: Path) -> None:
    """pyparsing 3.3.3 and multidict 7.2.1 keep most tests in one or two files: the empty-patch grading ran the
    full suite (then its hidden files' PASS_TO_PASS, 1,900 of pyparsing's 2,094 tests), 17-48 s a candidate.
    It now runs FAIL_TO_PASS, the affected PASS_TO_PASS and one test of every file; the gold grading before it
    still runs the hidden files' PASS_TO_PASS under this task's canaries."""
    from generate_fixtures import make_mini_project

    from generators.candidates import Candidate
    from sandboxes.fakes import HostSandbox
    from taskforge.core.settings import Settings
    from taskforge.pipeline.generate import ProfileJob, profile_source
    from taskforge.validate.steps import CandidateJob, validate_candidate

    src = make_mini_project(tmp_path / "minipkg")
    settings = Settings.load({"work_dir": str(tmp_path / "work"), "baseline_runs": 2, "battery": False})
    profile = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))
    cand = Candidate("stub:minipkg.stats.mean", "stub", "minipkg.stats.mean",
                     ("tests/test_stats.py::test_mean_ints", "tests/test_stats.py::test_mean_floats"), 1.0, "")
    res = validate_candidate(CandidateJob(profile.profile_dir, cand, settings.to_dict(), sandbox=HostSandbox()))
    assert res.task is not None, res.rejected
    runs = {(r.check, r.repeat): set(r.outcomes) for r in res.task.validation}
    gold, empty = runs[("gold_patch", 1)], runs[("empty_patch", 1)]
    hidden_p2p = {n for n in res.task.pass_to_pass if n.startswith("tests/test_stats.py::")}
    assert len(hidden_p2p) >= 2 and hidden_p2p <= gold  # the gold grading runs them all
    assert set(res.task.fail_to_pass) <= empty
    files = {n.split("::")[0] for n in res.task.pass_to_pass}
    assert {n.split("::")[0] for n in empty} >= files  # one test of every file at least
    assert len(empty) < len(res.task.fail_to_pass) + len(res.task.pass_to_pass), empty  # not the full suite
