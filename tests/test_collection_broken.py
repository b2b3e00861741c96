"""A stub whose code runs while a test module is imported breaks that module's collection: its tests join
FAIL_TO_PASS (a bigger task) instead of failing the candidate.

pyparsing 3.3.3: ``tests/test_matplotlib_cases.py`` imports matplotlib, whose mathtext parser runs pyparsing at
import, and ``tests/test_diagram.py`` builds grammars from ``examples/`` at import. A stub of a core parse
method broke those files at collection; the check after hiding charged that to the hiding
(``transform_failed``, 9 candidates of one run), or the empty-patch grading found them red. Here
``tests/test_rules.py`` compiles its rule at import: coverage ran ``compile_rule`` outside every test
(``CoverageMap.outside``), so validation collects the broken workspace and finds the file broken.
"""

from __future__ import annotations

import pytest
from generate_fixtures import make_mini_project

from generators.candidates import Candidate
from sandboxes.fakes import HostSandbox
from taskforge.core.settings import Settings
from taskforge.pipeline.generate import ProfileJob, profile_source
from taskforge.validate.steps import CandidateJob, validate_candidate

GRAMMAR = '''\
"""Rules of words."""


def compile_rule(text):
    """A rule: the words of ``text``, upper-cased."""
    words = text.split()
    return tuple(w.upper() for w in words)


def matches(rule, text):
    """Whether ``text`` says what ``rule`` does, whatever the case."""
    return tuple(text.upper().split()) == rule
'''

TEST_RULES = '''\
from minipkg.grammar import compile_rule, matches

RULE = compile_rule("hello world")  # at import: a stub of compile_rule breaks this module's collection


def test_matches():
    assert matches(RULE, "Hello World")


def test_no_match():
    assert not matches(RULE, "bye")
'''

TEST_COMPILE = '''\
from minipkg.grammar import compile_rule


def test_compile():
    assert compile_rule("a b") == ("A", "B")
'''


@pytest.mark.slow
def test_a_test_module_the_stub_breaks_at_import_joins_fail_to_pass(tmp_path) -> None:
    src = make_mini_project(tmp_path / "minipkg", {"minipkg/grammar.py": GRAMMAR, "tests/test_rules.py": TEST_RULES,
                                                   "tests/test_compile.py": TEST_COMPILE})
    settings = Settings.load({"work_dir": str(tmp_path / "work"), "baseline_runs": 2, "test_timeout_s": 300})
    profile = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))
    from taskforge.profile.build import Profile

    loaded = Profile.load(profile.profile_dir)
    entity = loaded.index.entity("minipkg.grammar.compile_rule")
    assert loaded.coverage.ran_outside_tests(entity)  # test_rules.py's import ran it
    # what coverage says covers it: test_compile only (test_rules' tests run matches, not compile_rule)
    cand = Candidate("stub:minipkg.grammar.compile_rule", "stub", "minipkg.grammar.compile_rule",
                     ("tests/test_compile.py::test_compile",), 1.0, "")
    res = validate_candidate(CandidateJob(profile.profile_dir, cand, settings.to_dict(), sandbox=HostSandbox()))
    assert res.task is not None, res.rejected
    assert set(res.task.fail_to_pass) == {"tests/test_compile.py::test_compile", "tests/test_rules.py::test_matches",
                                          "tests/test_rules.py::test_no_match"}
    assert not any(n.startswith("tests/test_rules.py") for n in res.task.pass_to_pass)
    assert any(r.check == "collect_broken" and not r.passed for r in res.task.validation)
