"""The generator end to end on a tiny self-built project, through a host-interpreter sandbox fake.

One pipeline run (module fixture) feeds most assertions: every strategy yields a valid task, the
rejections carry the right reasons, the three patches apply with plain ``git apply`` and give back the
original bytes, a rerun reuses the journal, and the reward path grades gold 1 / empty 0.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from generate_fixtures import WITH_CHECKS, make_mini_project

from generators.candidates import Candidate
from sandboxes.fakes import HostSandbox
from taskforge.core.outcomes import RejectReason
from taskforge.core.settings import Settings
from taskforge.dataset.reader import Dataset
from taskforge.pipeline.executors import SyncExecutor
from taskforge.pipeline.generate import GenerateOptions, ProfileJob, generate, profile_source
from taskforge.reward.reward import reward_many
from taskforge.reward.workspace import DatasetTrees
from taskforge.validate.steps import CandidateJob, validate_candidate


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    src = make_mini_project(root / "minipkg", WITH_CHECKS)
    settings = Settings.load({"work_dir": str(root / "work"), "baseline_runs": 2, "test_timeout_s": 300})
    out = root / "out"
    summaries = generate([str(src)], out, settings, GenerateOptions(), SyncExecutor(), sandbox=HostSandbox())
    profile = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))
    return SimpleNamespace(src=src, out=out, settings=settings, summary=summaries[0], profile=profile,
                           tasks={t.instance_id: t for t in Dataset.open(out).tasks()})


def _by(run, strategy: str, entity: str):
    return next(t for t in run.tasks.values() if t.strategy == strategy and t.entities[0] == entity)


def test_every_strategy_yields_tasks_and_the_funnel_is_right(run):
    s = run.summary
    assert not s.error
    assert s.accepted.get("stub", 0) >= 3 and s.accepted.get("delete", 0) >= 3 and s.accepted.get("module", 0) >= 2
    assert s.funnel.get("no_fail_to_pass") == 1  # stub:minipkg.checks.checked (its test passes on any raise)
    # stats.untested (no test runs it) and stats.ident (one statement), each for stub and delete
    assert s.funnel.get("no_covering_tests") == 2 and s.funnel.get("trivial_body") == 2
    assert not {"internal_error", "import_broken", "gold_failed", "unstable"} & set(s.funnel)


def test_module_task_hides_the_module_tests_and_keeps_the_rest(run):
    task = _by(run, "module", "minipkg.textfmt")
    assert set(task.fail_to_pass) == {"tests/test_textfmt.py::test_title_words", "tests/test_textfmt.py::test_shout"}
    assert "tests/test_stats.py::test_mean_ints" in task.pass_to_pass
    assert not any(n.startswith("tests/test_textfmt.py") for n in task.pass_to_pass)


def test_delete_keeps_sibling_tests_of_a_shared_test_module(run):
    task = _by(run, "delete", "minipkg.textfmt.shout")
    assert task.fail_to_pass == ("tests/test_textfmt.py::test_shout",)
    # test_title_words errored in the early run (the file imported ``shout``): after hiding it passes
    assert "tests/test_textfmt.py::test_title_words" in task.pass_to_pass
    checks = [(r.check, r.repeat, r.passed) for r in task.validation]
    assert ("early_broken", 1, False) in checks
    assert ("empty_patch", 2, True) in checks and ("gold_patch", 1, True) in checks
    assert ("gold_patch", 2, True) not in checks  # the baseline (2 runs) holds the gold repeats


def test_patches_apply_with_plain_git_apply_and_round_trip(run, tmp_path):
    for task in run.tasks.values():
        ws = tmp_path / task.instance_id
        shutil.copytree(run.src, ws)
        before = {p.relative_to(ws): p.read_bytes() for p in ws.rglob("*.py")}
        for patch in (task.setup_patch, task.test_patch, task.patch):
            subprocess.run(["git", "apply", "-"], input=patch.encode(), cwd=ws, check=True, timeout=60)
        after = {p.relative_to(ws): p.read_bytes() for p in ws.rglob("*.py")}
        assert after == before, task.instance_id


def test_reward_path_grades_gold_one_and_empty_zero(run):
    tasks = list(run.tasks.values())
    results = reward_many([(t, p) for t in tasks for p in (t.patch, "")], sandbox=HostSandbox(),
                          trees=DatasetTrees(run.out), settings=run.settings)
    assert [r.score for r in results] == [1.0, 0.0] * len(tasks)
    assert all(r.fraction == 0.0 for r in results[1::2])


def test_rerun_reuses_the_journal_and_writes_nothing_new(run):
    class NoRuns(HostSandbox):
        def run(self, env, workspace, request):
            raise AssertionError("a journaled candidate was validated again")

    again = generate([str(run.src)], run.out, run.settings, GenerateOptions(), SyncExecutor(), sandbox=NoRuns())
    assert again[0].accepted == run.summary.accepted and again[0].funnel == run.summary.funnel
    assert {t.instance_id for t in Dataset.open(run.out).tasks()} == set(run.tasks)


def test_a_red_pass_to_pass_test_rejects_the_candidate(run):
    # pretend the coverage map missed test_mean_floats: it fails without the feature but is not FAIL_TO_PASS
    cand = Candidate("stub:minipkg.stats.mean", "stub", "minipkg.stats.mean",
                     ("tests/test_stats.py::test_mean_ints",), 1.0, "")
    res = validate_candidate(CandidateJob(run.profile.profile_dir, cand, run.settings.to_dict(), sandbox=HostSandbox()))
    assert res.task is None and res.rejected.reason is RejectReason.SUITE_RED_AFTER_DELETION
    assert "test_mean_floats" in res.rejected.detail
    assert res.runs == 2  # early run + the hidden-workspace check; no grading was paid for


def test_naive_mode_accepts_the_same_task(run):
    cand = Candidate("stub:minipkg.stats.spread", "stub", "minipkg.stats.spread",
                     ("tests/test_stats.py::test_spread", "tests/test_stats.py::test_spread_single"), 1.0, "")
    job = CandidateJob(run.profile.profile_dir, cand, run.settings.to_dict(), sandbox=HostSandbox())
    default = validate_candidate(job)
    naive = validate_candidate(dataclasses.replace(job, mode="naive"))
    assert default.task is not None and naive.task is not None
    assert default.task.instance_id == naive.task.instance_id
    assert default.task.fail_to_pass == naive.task.fail_to_pass
    assert default.task.pass_to_pass == naive.task.pass_to_pass
