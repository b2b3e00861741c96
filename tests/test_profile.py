"""Baseline classification, the coverage map, and profiles built through a scripted fake sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandboxes.protocol import RunOutput, RunRequest
from taskforge.core.entities import Entity, EntityKind
from taskforge.core.environment import EnvSpec, PreparedEnv
from taskforge.core.errors import DatasetError, NoTestsError, SandboxTimeout
from taskforge.core.settings import Settings
from taskforge.core.testreport import Outcome, TestReport
from taskforge.core.testreport import TestResult as Result
from taskforge.profile.baseline import Baseline, compute_baseline
from taskforge.profile.build import Profile, build_profile
from taskforge.profile.coverage_map import CoverageMap, coverage_percent, covered_entities
from tests.fixtures_repos import make_toy_project


def report(*pairs: tuple[str, Outcome], duration: float = 0.1) -> TestReport:
    return TestReport(tuple(Result(n, o, duration) for n, o in pairs), exit_code=0, duration=1.0)


P, F, S, E, XF, XP = Outcome.PASSED, Outcome.FAILED, Outcome.SKIPPED, Outcome.ERROR, Outcome.XFAILED, Outcome.XPASSED


def test_baseline_classifies_consistent_and_inconsistent_tests() -> None:
    runs = [
        report(("a", P), ("b", F), ("c", S), ("d", P), ("e", XF), ("f", E), ("g", P), ("x", XF)),
        report(("a", P), ("b", F), ("c", S), ("d", F), ("e", XF), ("f", F), ("g", P), ("h", P), ("x", XF)),
        report(("a", P), ("b", E), ("c", S), ("d", P), ("e", P), ("f", XP), ("x", XF)),
    ]
    b = compute_baseline(runs)
    assert b.passed == {"a"}  # an xfailed test is never graded as passed (click's xfail in PASS_TO_PASS)
    assert b.failed == {"b", "f"} == b.broken  # failed/error/xpassed in every run
    assert b.skipped == {"c", "x"}  # skipped or xfailed in every run
    assert b.flaky == {"d", "e", "g", "h"}  # changed outcome, or missing from a run
    assert b.counts() == {"passed": 1, "failed": 2, "flaky": 4, "skipped": 2}
    assert Baseline.from_dict(json.loads(json.dumps(b.to_dict()))) == b


def test_baseline_durations_are_medians_of_timing_runs() -> None:
    slow = report(("a", P), duration=9.0)
    fast = [report(("a", P), duration=d) for d in (0.1, 0.3, 0.2)]
    b = compute_baseline([slow, *fast], timing_reports=fast)
    assert b.durations["a"] == pytest.approx(0.2)
    assert b.suite_seconds() == pytest.approx(0.2)


def _entity(name: str, kind: EntityKind, start: int, end: int, body: tuple[int, int]) -> Entity:
    return Entity(qualname=f"toypkg.{name}", kind=kind, file="toypkg/__init__.py", start_line=start,
                  end_line=end, body_start=body[0], body_end=body[1])


def test_coverage_map_queries_and_round_trip(tmp_path: Path) -> None:
    cm = CoverageMap.from_contexts({"./toypkg/__init__.py": {6: ["t::add", "t::fails"], 7: ["t::add"],
                                                              12: ["t::shout"]}})
    assert cm.tests_for_lines("toypkg/__init__.py", 5, 7) == {"t::add", "t::fails"}
    assert cm.tests_for_lines("toypkg/__init__.py", 5, 7, among={"t::add"}) == {"t::add"}
    assert cm.tests_for_lines("toypkg/__init__.py", 13, 40) == frozenset()
    assert cm.tests_for_lines("other.py", 1, 100) == frozenset()
    add = _entity("add", EntityKind.FUNCTION, 4, 7, (6, 7))
    assert cm.tests_for_entity(add) == {"t::add", "t::fails"}
    assert cm.restricted_to({"t::shout"}).lines == {"toypkg/__init__.py": {12: frozenset({"t::shout"})}}
    cm.save(tmp_path / "c.json")
    assert CoverageMap.load(tmp_path / "c.json") == cm
    raw = json.loads((tmp_path / "c.json").read_text())
    assert raw["schema_version"] == 1 and raw["tests"] == ["t::add", "t::fails", "t::shout"]


def test_covered_entities_need_a_reliable_test_on_the_body() -> None:
    cm = CoverageMap.from_contexts({"toypkg/__init__.py": {4: ["t::a"], 6: ["t::flaky"], 12: ["t::a"]}})
    add = _entity("add", EntityKind.FUNCTION, 4, 7, (6, 7))  # only its def line ran under a reliable test
    shout = _entity("shout", EntityKind.FUNCTION, 10, 13, (12, 13))
    assert covered_entities([add, shout], cm, reliable={"t::a"}) == (shout,)
    stmts = {"toypkg/__init__.py": frozenset({4, 6, 7, 10, 12, 13})}
    assert coverage_percent(cm, [add, shout], stmts) == pytest.approx(50.0)  # 6 and 12 of 6, 7, 12, 13


class ScriptedSandbox:
    """A fake ``Sandbox``: returns scripted reports in order and records the requests."""

    name = "fake"

    def __init__(self, reports: list[TestReport], coverage: dict | None = None) -> None:
        self.reports = list(reports)
        self.coverage = coverage
        self.requests: list[RunRequest] = []
        self.workspaces: list[Path] = []

    def prepare(self, spec: EnvSpec, repo_dir: Path) -> PreparedEnv:
        return PreparedEnv(spec=spec, backend="fake", location="nowhere", python_version="3.11.0",
                           frozen=("pytest==8.0",))

    def run(self, env: PreparedEnv, workspace: Path, request: RunRequest) -> RunOutput:
        self.requests.append(request)
        self.workspaces.append(workspace)
        assert (workspace / "toypkg" / "__init__.py").is_file() and not (workspace / ".git").exists()
        rep = self.reports.pop(0)
        return RunOutput(rep, self.coverage if request.coverage else None, 0.5)


TOY_IDS = ("tests/test_toy.py::test_add", "tests/test_toy.py::test_shout", "tests/test_toy.py::test_fails")


def test_build_profile_through_fake_sandbox_and_save_load(tmp_path: Path) -> None:
    src = make_toy_project(tmp_path / "toy")
    a, s, f = TOY_IDS
    runs = [report((a, P), (s, P), (f, F)), report((a, P), (s, F), (f, F)), report((a, P), (s, P), (f, F))]
    cov = {"toypkg/__init__.py": {6: (a, f), 7: (a, f), 12: (s,), 13: (s,)}}
    box = ScriptedSandbox(runs, cov)
    settings = Settings(work_dir=tmp_path / "work", baseline_runs=3, grading_check=False)  # tests/test_harness_check.py
    prof = build_profile(str(src), settings, box)
    assert [r.coverage for r in box.requests] == [True, False, False]  # one coverage run per profile
    # ... which does not trace the test files: no entity lies in them
    assert [r.coverage_omit for r in box.requests] == [("tests/test_toy.py",), (), ()]
    assert all(r.read_only == ("tests",) for r in box.requests)  # as in every grading
    assert not any(w.exists() for w in box.workspaces)  # throw-away workspace removed
    assert prof.baseline.passed == {a} and prof.baseline.flaky == {s} and prof.baseline.failed == {f}
    assert prof.snapshot.name == "toy"
    names = {e.qualname for e in prof.covered_entities()}
    assert "toypkg.add" in names  # test_add is reliable and ran add's body
    assert "toypkg.shout" not in names  # only the flaky test ran it
    assert "toypkg.unused" not in names
    summary = prof.summary()
    assert {k: summary[k] for k in ("tests_passed", "tests_failed", "tests_flaky", "tests_skipped")} == \
        {"tests_passed": 1, "tests_failed": 1, "tests_flaky": 1, "tests_skipped": 0}
    assert summary["entities"] == len(prof.entities) >= 4  # module + add + shout + unused
    assert set(prof.timings) >= {"resolve", "detect", "prepare", "coverage_run", "run_2", "run_3", "index",
                                 "total"}

    out = prof.save(tmp_path / "profile")
    meta = json.loads((out / "profile.json").read_text())
    assert meta["schema_version"] == 1 and meta["files"]["coverage"] == "coverage.json"
    loaded = Profile.load(out)
    assert loaded.baseline == prof.baseline and loaded.coverage == prof.coverage
    assert loaded.snapshot == prof.snapshot and loaded.env == prof.env
    assert {e.qualname for e in loaded.entities} == {e.qualname for e in prof.entities}
    assert loaded.summary() == summary


def test_no_collectable_tests_is_a_clear_error(tmp_path: Path) -> None:
    src = make_toy_project(tmp_path / "toy")
    empty = TestReport((), exit_code=5, duration=0.1, output_tail="no tests ran in 0.01s")
    with pytest.raises(NoTestsError, match="has no tests pytest can collect"):
        build_profile(str(src), Settings(work_dir=tmp_path / "w"), ScriptedSandbox([empty]))


def test_suite_timeout_is_a_clear_error(tmp_path: Path) -> None:
    src = make_toy_project(tmp_path / "toy")
    hung = TestReport.crashed(exit_code=-9, duration=5.0, output_tail="", timed_out=True)
    with pytest.raises(SandboxTimeout, match="ran past"):
        build_profile(str(src), Settings(work_dir=tmp_path / "w", test_timeout_s=5), ScriptedSandbox([hung]))


def test_load_refuses_missing_or_foreign_profiles(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="holds no profile"):
        Profile.load(tmp_path)
    (tmp_path / "profile.json").write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(DatasetError, match="schema_version 99"):
        Profile.load(tmp_path)


def test_runner_files_are_the_projects_own_preloaded_sources() -> None:
    """Of the runner's ``preloaded`` record, only the project's code counts (never a conftest or a test)."""
    from taskforge.core.environment import EnvSpec
    from taskforge.profile.build import runner_files

    spec = EnvSpec("iniconfig", "3.11", ".", src_roots=("src",), package_dirs=("src/iniconfig",),
                   test_paths=("testing",))
    preloaded = ["src/iniconfig/__init__.py", "src/iniconfig/_parse.py", "testing/conftest.py", "_tfgab12.py",
                 "src/iniconfig/py.typed", "src/iniconfigx/other.py"]
    assert runner_files(preloaded, spec) == ("src/iniconfig/__init__.py", "src/iniconfig/_parse.py")
    assert spec.key == EnvSpec("iniconfig", "3.11", ".", src_roots=("src",), package_dirs=("src/iniconfig",),
                               test_paths=("testing",), runner_files=("x.py",)).key  # not part of the key


def test_a_test_functions_coverage_context_stands_for_its_instances(tmp_path) -> None:
    """A large parametrized suite's coverage contexts are test functions (the runner groups them); the map
    answers with the instances, and keeps them across a save and a load."""
    from taskforge.core.entities import Entity, EntityKind
    from taskforge.profile.coverage_map import CoverageMap

    nodeids = ["t.py::test_f[1]", "t.py::test_f[2]", "t.py::test_g", "t.py::TestC::test_h[x]"]
    contexts = {"pkg/m.py": {3: ["t.py::test_f", ""], 4: ["t.py::test_g"], 9: ["t.py::TestC::test_h"]}}
    cov = CoverageMap.from_contexts(contexts, nodeids=nodeids)
    assert cov.tests_for_lines("pkg/m.py", 1, 3) == {"t.py::test_f[1]", "t.py::test_f[2]"}
    assert cov.tests_for_lines("pkg/m.py", 1, 9, among={"t.py::test_f[2]", "t.py::TestC::test_h[x]"}) == \
        {"t.py::test_f[2]", "t.py::TestC::test_h[x]"}
    assert cov.tests == frozenset(nodeids) and cov.outside == {"pkg/m.py": frozenset({3})}
    path = tmp_path / "coverage.json"
    cov.save(path)
    again = CoverageMap.load(path)
    assert again == cov and again.tests_for_lines("pkg/m.py", 3, 3) == {"t.py::test_f[1]", "t.py::test_f[2]"}
    narrowed = cov.restricted_to({"t.py::test_f[1]", "t.py::test_g"})
    assert narrowed.tests == {"t.py::test_f[1]", "t.py::test_g"}
    e = Entity("pkg.m.f", EntityKind.FUNCTION, "pkg/m.py", 2, 3, body_start=3, body_end=3)
    assert cov.tests_for_entity(e) == {"t.py::test_f[1]", "t.py::test_f[2]"}
    plain = CoverageMap.from_contexts({"pkg/m.py": {3: ["t.py::test_g"]}}, nodeids=nodeids)
    assert plain.instances == {} and plain.tests == {"t.py::test_g"}


def test_the_workspace_is_copied_before_the_static_index_starts(tmp_path: Path, monkeypatch) -> None:
    """Each system call of the copy waits for the GIL while the index's CPU-bound thread runs: networkx's copy
    took 12 s beside it, under a second alone. So the copy comes first."""
    from generators import static_index

    src = make_toy_project(tmp_path / "toy")
    a, s, f = TOY_IDS
    seen: list[list[str]] = []
    real = static_index.build_index

    def build_index(root: Path, spec: EnvSpec):
        seen.append(sorted(p.name for p in (tmp_path / "work" / "workspaces").glob("*/ws")))
        return real(root, spec)

    monkeypatch.setattr(static_index, "build_index", build_index)
    box = ScriptedSandbox([report((a, P), (s, P), (f, F))], {"toypkg/__init__.py": {6: (a,)}})
    build_profile(str(src), Settings(work_dir=tmp_path / "work", baseline_runs=1, grading_check=False), box)
    assert seen == [["ws"]]  # the index began with the workspace already there
    assert not any(w.exists() for w in box.workspaces)
