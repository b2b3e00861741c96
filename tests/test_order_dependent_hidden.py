"""A hidden test that fails under the deletion only beside the PASS_TO_PASS tests leaves the task.

pyparsing 3.3.3: a stub of ``And.parseImpl`` was accepted with 6 instances of
``testInfixNotationNestedInfixAsOperand`` in FAIL_TO_PASS. They failed in every grading generation ran (hidden
tests + PASS_TO_PASS), and passed in the grading ``taskforge validate`` gives the empty patch (FAIL_TO_PASS
alone), so `validate` called the accepted task broken. Here ``test_counts_quiet`` passes under the stub only
when no test has noted a word before it, and ``test_a_tolerant`` (a PASS_TO_PASS test that runs the stubbed
function and passes either way) notes one. Validation's repeat grades the empty patch as `validate` does, and
the test leaves both test sets.
"""

from __future__ import annotations

import pytest
from generate_fixtures import make_mini_project

from generators.candidates import Candidate
from sandboxes.fakes import HostSandbox
from taskforge.core.settings import Settings
from taskforge.pipeline.generate import ProfileJob, profile_source
from taskforge.reward.reward import reward_many
from taskforge.reward.workspace import DirectoryTrees
from taskforge.validate.steps import CandidateJob, validate_candidate

TALLY = '''\
"""Counting words, with a shared log of what was noted."""

SEEN = []


def note(word):
    """Remember ``word`` in the shared log; how many words it holds."""
    SEEN.append(word)
    return len(SEEN)


def tally(text):
    """How often each word occurs in ``text``."""
    counts = {}
    for word in text.split():
        counts[word] = counts.get(word, 0) + 1
    return counts
'''

TEST_TALLY = '''\
from minipkg import tally as t


def test_a_tolerant():
    t.note("x")
    try:
        t.tally("x")
    except NotImplementedError:
        pass


def test_counts():
    assert t.tally("a b a") == {"a": 2, "b": 1}


def test_counts_quiet():
    try:
        assert t.tally("c") == {"c": 1}
    except NotImplementedError:
        assert not t.SEEN
'''

QUIET = "tests/test_tally.py::test_counts_quiet"


@pytest.mark.slow
def test_a_hidden_test_green_without_the_pass_to_pass_tests_leaves_the_task(tmp_path) -> None:
    src = make_mini_project(tmp_path / "minipkg", {"minipkg/tally.py": TALLY, "tests/test_tally.py": TEST_TALLY})
    settings = Settings.load({"work_dir": str(tmp_path / "work"), "baseline_runs": 2, "test_timeout_s": 300,
                              "battery": False})
    profile = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))
    covering = ("tests/test_tally.py::test_a_tolerant", "tests/test_tally.py::test_counts", QUIET)
    cand = Candidate("stub:minipkg.tally.tally", "stub", "minipkg.tally.tally", covering, 1.0, "")
    res = validate_candidate(CandidateJob(profile.profile_dir, cand, settings.to_dict(), sandbox=HostSandbox()))
    assert res.task is not None, res.rejected
    task = res.task
    assert task.fail_to_pass == ("tests/test_tally.py::test_counts",)
    assert QUIET not in task.pass_to_pass and task.provenance["order_dependent"] == [QUIET]
    assert task.difficulty.fail_to_pass == 1
    # the grading `taskforge validate` gives the empty patch now finds no hidden test green
    import dataclasses

    from taskforge.profile.build import Profile

    trees = DirectoryTrees(Profile.load(profile.profile_dir).repo_dir)
    gold, empty = reward_many([(task, task.patch), (dataclasses.replace(task, pass_to_pass=()), "")],
                              sandbox=HostSandbox(), trees=trees, settings=settings)
    assert gold.score == 1.0 and empty.score == 0.0 and empty.fraction == 0.0
