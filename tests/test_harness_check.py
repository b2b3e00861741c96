"""The profile's grading-harness check (``taskforge.profile.harness_check``) and the harness fixes it found.

A toy repository holds tests that pass in plain pytest but not where tasks are graded (the reward path:
``PYTEST_CURRENT_TEST`` unset, strict equality in hidden test files); the profile grades the original
once and drops exactly those from ``reliable``, recorded in the baseline. The fixes: a test file's own
``__eq__`` class on one side of ``==`` no longer fails grading (toolz ``test_compose_metadata``) while
the side the code under test produced is still checked; the loopback interface is up in ``unshare -rn``
runs (boltons' socket tests failed in every warm validation run).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxes.fakes import SubprocessSandbox
from sandboxes.protocol import RunOutput, RunRequest
from taskforge.core.errors import SandboxError
from taskforge.core.settings import Settings
from taskforge.profile.baseline import Baseline, GradingCheck
from taskforge.profile.build import Profile, build_profile
from taskforge.profile.harness_check import check_task, judge
from taskforge.reward.result import RewardFlag, RewardResult
from tests.fixtures_repos import make_toy_project, write

SENSITIVE = '''\
import os

from toypkg import add
from toypkg.extra import anything


class _Anything:
    def __eq__(self, other):
        return True


ANYTHING = _Anything()


def test_reads_current_test_name():
    assert "test_reads_current_test_name" in os.environ["PYTEST_CURRENT_TEST"]


def test_compares_with_a_module_level_matcher():
    assert add(1, 2) == ANYTHING


def test_compares_with_its_own_class():
    assert add(1, 2) == _Anything()


def test_source_always_equal_against_own_class():
    assert anything() == _Anything()


def test_plain():
    assert add(1, 2) == 3
'''
EXTRA = '''\
class Always:
    def __eq__(self, other):
        return True


def anything():
    return Always()
'''
T = "tests/test_sensitive.py::"
ONLY_UNDER_GRADING = {T + "test_reads_current_test_name", T + "test_compares_with_a_module_level_matcher",
                      T + "test_source_always_equal_against_own_class"}


def _toy(root: Path) -> Path:
    src = make_toy_project(root)
    write(src, {"tests/test_sensitive.py": SENSITIVE, "toypkg/extra.py": EXTRA})
    return src


def test_profile_drops_the_tests_that_fail_only_under_the_grading_harness(tmp_path: Path) -> None:
    src = _toy(tmp_path / "toy")
    settings = Settings(work_dir=tmp_path / "work", baseline_runs=1)
    prof = build_profile(str(src), settings, SubprocessSandbox())
    b = prof.baseline
    assert b.grading_failed == ONLY_UNDER_GRADING  # each passed its plain baseline run
    assert not (ONLY_UNDER_GRADING & b.reliable)
    assert {T + "test_plain", T + "test_compares_with_its_own_class", "tests/test_toy.py::test_add"} <= b.reliable
    check = b.grading_check
    assert check is not None and check.status == "dropped" and check.failed == 3
    assert check.graded == len(b.reliable) + 3 and check.first == tuple(sorted(ONLY_UNDER_GRADING))
    assert check.outcomes == {"failed": 3}
    assert check.line.startswith("3 tests fail only under the grading harness")
    assert "grading_check" in prof.timings
    summary = prof.summary()
    assert summary["tests_grading_failed"] == 3 and summary["grading_check"] == check.line
    loaded = Profile.load(prof.save(tmp_path / "profile"))
    assert loaded.baseline == b
    raw = json.loads((tmp_path / "profile" / "baseline.json").read_text())
    assert raw["grading_check"]["failed"] == 3 and sorted(raw["grading_failed"]) == sorted(ONLY_UNDER_GRADING)


def test_without_the_check_the_plain_baseline_keeps_them(tmp_path: Path) -> None:
    src = _toy(tmp_path / "toy")
    prof = build_profile(str(src), Settings(work_dir=tmp_path / "work", baseline_runs=1, grading_check=False),
                         SubprocessSandbox())
    assert ONLY_UNDER_GRADING <= prof.baseline.reliable
    assert prof.baseline.grading_check is None and not prof.baseline.grading_failed


class _BrokenGrading(SubprocessSandbox):
    def run(self, env, workspace, request: RunRequest) -> RunOutput:  # noqa: ANN001
        if request.grading:
            raise SandboxError("the grading sandbox is gone")
        return super().run(env, workspace, request)


def test_a_check_that_cannot_run_keeps_the_baseline_and_says_why(tmp_path: Path) -> None:
    src = _toy(tmp_path / "toy")
    lines: list[str] = []
    prof = build_profile(str(src), Settings(work_dir=tmp_path / "work", baseline_runs=1), _BrokenGrading(),
                         progress=lines.append)
    assert ONLY_UNDER_GRADING <= prof.baseline.reliable and not prof.baseline.grading_failed
    check = prof.baseline.grading_check
    assert check is not None and check.status == "error" and "the grading sandbox is gone" in check.detail
    assert check.line in lines  # one line in the progress log


def _baseline(*ids: str) -> Baseline:
    return Baseline(runs=1, passed=frozenset(ids), failed=frozenset(), flaky=frozenset(), skipped=frozenset())


def _result(outcomes: dict[str, str], flags: tuple[RewardFlag, ...] = (), detail: str = "") -> RewardResult:
    return RewardResult("x", 0.0, 0.0, outcomes, {}, {}, flags, detail, 0.0)


@pytest.mark.parametrize(("flags", "outcomes", "status"), [
    ((RewardFlag.TIMEOUT,), {"a": "missing", "b": "passed"}, "error"),  # the run gave no verdict
    ((), {"a": "failed", "b": "error"}, "error"),  # nothing passed: a harness problem, not two tests
    ((RewardFlag.CANARY_FAILED, RewardFlag.TAMPERING), {"a": "failed", "b": "passed"}, "flagged"),
    ((RewardFlag.MISSING_TESTS,), {"a": "missing", "b": "passed"}, "dropped"),
    ((), {"a": "passed", "b": "passed"}, "passed"),
])
def test_judge(flags: tuple[RewardFlag, ...], outcomes: dict[str, str], status: str, tmp_path: Path) -> None:
    env = SubprocessSandbox().prepare(make_spec(), tmp_path)
    task = check_task(tmp_path, env, _baseline("tests/test_a.py::a", "tests/test_a.py::b"))
    outcomes = {f"tests/test_a.py::{k}": v for k, v in outcomes.items()}
    check, failed = judge(task, _result(outcomes, flags, "d"), 1.0)
    assert check.status == status
    if status == "dropped":
        assert failed == {"tests/test_a.py::a"} and check.outcomes == {"missing": 1}
    else:
        assert failed == frozenset()
    b = _baseline(*outcomes).with_grading_check(check, failed)
    assert b.passed | b.grading_failed == set(outcomes) and GradingCheck.from_dict(check.to_dict()) == check


def make_spec():  # noqa: ANN201
    from taskforge.core.environment import EnvSpec

    return EnvSpec(project_name="toy", python="3.11", install_target="", test_paths=("tests",))


def test_strict_equality_leaves_the_test_files_own_class_side_unchecked() -> None:
    from taskforge.reward.strict_asserts import strict_source

    src = ("class Eq:\n    def __eq__(self, o):\n        return True\n\n\ndef test_a():\n"
           "    assert f() == Eq()\n    assert Eq() == f()\n    assert f() == g()\n    assert f() == Other()\n")
    out = strict_source(src, "_q")
    assert "assert _q(f(), Eq(), 2)\n" in out and "assert _q(Eq(), f(), 1)\n" in out
    assert "assert _q(f(), g())\n" in out and "assert _q(f(), Other())\n" in out


@pytest.mark.skipif(not shutil.which("unshare") or subprocess.run(["unshare", "-rn", "true"]).returncode != 0,
                    reason="unshare -rn is not available here")
def test_the_runner_brings_the_loopback_up_in_its_own_network_namespace() -> None:
    runner_dir = Path(__file__).resolve().parents[1] / "sandboxes" / "runner"
    probe = ("import socket, sys; sys.path.insert(0, sys.argv[1]); import pytest_runner\n"
             "def connect():\n"
             "    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
             "    socket.create_connection(s.getsockname(), timeout=5).close()\n"
             "try:\n    connect(); print('up before')\nexcept OSError:\n    print('down before')\n"
             "print(pytest_runner.loopback_up()); connect(); print('connected')\n")
    res = subprocess.run(["unshare", "-rn", sys.executable, "-c", probe, str(runner_dir)], capture_output=True,
                         text=True, timeout=60)
    assert res.stdout.split() == ["down", "before", "True", "connected"], res.stderr
    # outside such a namespace (the host, a bubblewrap jail) it changes nothing and reports the state
    from sandboxes.runner.pytest_runner import loopback_up

    assert loopback_up() is True
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))


def test_the_corpus_report_shows_tests_that_fail_only_under_grading(tmp_path: Path) -> None:
    from taskforge.bench.corpus_report import PackageResult, baseline_numbers, render_markdown

    check = GradingCheck("dropped", graded=3, failed=1, first=("tests/t.py::x",), outcomes={"failed": 1}, detail="d")
    b = _baseline("tests/t.py::y", "tests/t.py::x")
    b = b.with_grading_check(check, frozenset({"tests/t.py::x"}))
    (tmp_path / "baseline.json").write_text(json.dumps(b.to_dict()))
    nums = baseline_numbers(tmp_path)
    assert nums["baseline_passed"] == 1 and nums["baseline_grading_failed"] == 1 and nums["baseline_total"] == 2
    assert nums["grading_check"].startswith("1 tests fail only under the grading harness")
    row = PackageResult("pkg", "1.0", plain_passed=2, **{k: v for k, v in nums.items() if k != "suite_s"})
    assert row.pass_match  # the dropped test passed plainly
    text = render_markdown([row], {})
    assert "## Grading-harness check" in text and "- pkg: 1 tests fail only under the grading harness" in text



IMPORT_TIME_PKG = {
    "dyn/__init__.py": "import sys\n\nfrom dyn.shapes import Circle, Square, area_of\n\n"
                       "UNIT = area_of(Circle(1))  # runs at import\n"
                       "if sys.version_info < (3, 0):  # a legacy branch: never runs\n"
                       "    LEGACY = Square(2).area()\n",
    "dyn/shapes.py": '''\
class Circle:
    def __init__(self, r):
        self.r = r

    def area(self):
        return 3 * self.r * self.r


class Square:
    def __init__(self, s):
        self.s = s

    def area(self):
        return self.s * self.s


def area_of(shape):
    return shape.area()
''',
    "tests/test_dyn.py": '''\
from dyn import UNIT, Square, area_of

BIG = Square(5).area()  # the test module's own code: it runs at collection, not at the package's import


def test_unit():
    assert UNIT == 3


def test_square():
    assert area_of(Square(2)) == 4
''',
}


def test_coverage_outside_tests_narrows_the_static_import_time_guess(tmp_path: Path) -> None:
    """A module-level call in a branch that never runs (``if sys.version_info < (3, 0):``) counts as an
    import-time use statically, so a stub of ``Square.area`` was refused; the coverage run saw it not run at
    the package's import. A test module runs it at collection: that breaks that test file only (validation's
    ``collect_broken``), not the package (parso's ``Module``, cachetools' ``Cache`` were refused for it)."""
    src = tmp_path / "dyn"
    write(src, IMPORT_TIME_PKG)
    prof = build_profile(str(src), Settings(work_dir=tmp_path / "work", baseline_runs=1, grading_check=False),
                         SubprocessSandbox())
    assert prof.coverage.outside  # the runner's empty context is kept apart from the tests
    assert "" not in prof.coverage.tests
    at_import = prof.index.import_time_entities()
    assert {"dyn.shapes.Circle.__init__", "dyn.shapes.area_of"} <= at_import
    assert "dyn.shapes.Square.area" not in at_import  # the static closure alone includes it
    square_area = prof.index.entity("dyn.shapes.Square.area")
    assert prof.coverage.ran_outside_tests(square_area) and not prof.coverage.ran_at_import(square_area)
    assert prof.coverage.ran_at_import(prof.index.entity("dyn.shapes.Circle.area"))
    loaded = Profile.load(prof.save(tmp_path / "profile"))
    assert loaded.coverage.outside == prof.coverage.outside
    assert loaded.coverage.collection == prof.coverage.collection and prof.coverage.collection
    assert "dyn.shapes.Square.area" not in loaded.index.import_time_entities()
    from generators.static_index import build_index
    assert "dyn.shapes.Square.area" in build_index(prof.repo_dir, prof.spec).import_time_entities()


def test_a_source_whose_grading_harness_passes_nothing_ends_with_one_line_and_no_candidate() -> None:
    """fastjsonschema 2.22.3: an obsolete plugin crashed every grading; the check said "no test passed" and
    all 177 candidates were validated anyway (71 gold_failed, 0 tasks)."""
    from taskforge.pipeline.generate import harness_refusal
    from taskforge.profile.baseline import GradingCheck

    why = harness_refusal(GradingCheck("error", graded=858, detail="no test passed: INTERNALERROR"))
    assert "none of the 858 reliable tests" in why and "\n" not in why
    for check in (None, GradingCheck("passed", graded=858), GradingCheck("dropped", graded=858, failed=3),
                  GradingCheck("error", graded=858, detail="the grading run gave no verdict (timeout): ...")):
        assert harness_refusal(check) == ""  # a slow check says nothing of a task's smaller gradings


SHARED_SETUP_PKG = {
    "keys/__init__.py": "",
    "keys/gen.py": '''\
def make_key(n):
    return list(range(n))


def sign(key, msg):
    return f"{len(key)}:{msg}"
''',
    "tests/test_unit.py": '''\
import unittest

from keys.gen import make_key, sign


class KeyTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.key = make_key(3)

    def test_sign(self):
        self.assertEqual(sign(self.key, "a"), "3:a")

    def test_len(self):
        self.assertEqual(len(self.key), 3)
''',
    "tests/test_fixture.py": '''\
import pytest

from keys.gen import make_key


@pytest.fixture(scope="module")
def key():
    return make_key(4)


def test_first(key):
    assert len(key) == 4


def test_second(key):
    assert key[-1] == 3


def test_unrelated():
    assert True
''',
}


def test_a_wide_fixtures_coverage_counts_for_every_test_that_uses_it(tmp_path: Path) -> None:
    """ecdsa's ``setUpClass`` builds the keys every test of its class uses; coverage gave ``make_key`` to the
    first test only, so deleting it turned the others into red PASS_TO_PASS tests (suite_red_after_deletion)."""
    src = tmp_path / "keys"
    write(src, SHARED_SETUP_PKG)
    prof = build_profile(str(src), Settings(work_dir=tmp_path / "work", baseline_runs=1, grading_check=False),
                         SubprocessSandbox())
    covering = prof.coverage.tests_for_entity(prof.index.entity("keys.gen.make_key"))
    assert covering == {"tests/test_unit.py::KeyTests::test_sign", "tests/test_unit.py::KeyTests::test_len",
                        "tests/test_fixture.py::test_first", "tests/test_fixture.py::test_second"}
    assert prof.coverage.tests_for_entity(prof.index.entity("keys.gen.sign")) == {
        "tests/test_unit.py::KeyTests::test_sign"}
    assert not any(t.startswith("<") for t in prof.coverage.tests)


STATEFUL = '''\
import pytest

CASES = ["plain", "switch", "switched", "also_switched"]


class TestTable:
    mode = "off"

    @pytest.mark.parametrize("case", CASES)
    def test_case(self, case):
        if case == "switch":  # an options row: it sets the class's state and skips (wcmatch's ``Options``)
            type(self).mode = "on"
            pytest.skip("change options")
        assert type(self).mode == ("off" if case == "plain" else "on")
'''


def test_skipped_tests_beside_the_graded_ones_run_along(tmp_path: Path) -> None:
    """wcmatch 12.0.4: ``Options`` rows of a case table set class attributes and skip; the cases after them rely
    on that. A grading that selected the reliable tests left the skipped rows out, and the check dropped 319 of
    3,169 tests as failing only under the grading harness. The skipped tests beside them run along, ungraded
    (``taskforge.core.companions``), in the check, in validation's runs and in every grading."""
    from taskforge.core.companions import companions

    src = make_toy_project(tmp_path / "toy")
    write(src, {"tests/test_stateful.py": STATEFUL})
    prof = build_profile(str(src), Settings(work_dir=tmp_path / "work", baseline_runs=1), SubprocessSandbox())
    s = "tests/test_stateful.py::TestTable::test_case"
    assert f"{s}[switch]" in prof.baseline.skipped
    assert {f"{s}[plain]", f"{s}[switched]", f"{s}[also_switched]"} <= prof.baseline.reliable
    assert not prof.baseline.grading_failed, prof.baseline.grading_check
    task = check_task(src, prof.env, prof.baseline)
    assert f"{s}[switch]" in task.provenance["companions"]
    # beside: the same class (or the same module, for module-level tests), never the requested ones
    assert companions(prof.baseline.skipped, [f"{s}[switched]"]) == (f"{s}[switch]",)
    assert companions(prof.baseline.skipped, [f"{s}[plain]", f"{s}[switch]"]) == ()
    assert companions(prof.baseline.skipped, ["tests/test_toy.py::test_add"]) == (
        "tests/test_toy.py::test_skipped", "tests/test_toy.py::test_xfail")


def test_strict_equality_reads_no_file_without_an_assert_statement(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file with no ``assert`` keyword (unittest's ``assertEqual`` only: idna's 1.4 MB generated test file)
    is returned as it is, never parsed by libcst; the file's own ``__eq__`` classes are read with ``ast``."""
    import libcst

    from taskforge.reward import strict_asserts

    def no_libcst(*_a: object, **_k: object) -> None:
        raise AssertionError("libcst parsed a file with nothing to rewrite")

    src = ("import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
           "        self.assertEqual(f('x'), 'y')  # assertion, assert_, reassert\n")
    monkeypatch.setattr(libcst, "parse_module", no_libcst)
    assert strict_asserts.strict_source(src, "_q") == src
    monkeypatch.undo()
    own = ("class Outer:\n    class Eq:\n        async def __eq__(self, o):\n            return True\n"
           "class Plain:\n    def eq(self, o):\n        return '__eq__'\n")
    assert strict_asserts._own_eq_classes(own) == frozenset({"Eq"})
    assert strict_asserts._own_eq_classes("def f(:\n    __eq__\n") == frozenset()
    out = strict_asserts.strict_source(own + "def test_b():\n    assert f() == Eq()\n", "_q")
    assert "assert _q(f(), Eq(), 2)\n" in out
