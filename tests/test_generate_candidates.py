"""Candidates: who is skipped up front (and why), how the rest are ranked, deterministic order."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from generate_fixtures import make_mini_project

from generators.candidates import Candidate, costly, interleave, propose
from generators.env_detect import detect_env
from generators.registry import all_strategies
from generators.static_index import build_index
from taskforge.core.outcomes import RejectReason
from taskforge.core.testreport import Outcome, TestReport
from taskforge.core.testreport import TestResult as Result
from taskforge.profile.baseline import compute_baseline
from taskforge.profile.coverage_map import CoverageMap

POINT = '''\
class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __eq__(self, other):
        same = self.x == other.x
        return same and self.y == other.y

    def norm(self):
        """Manhattan norm."""
        ax = abs(self.x)
        return ax + abs(self.y)
'''

TESTING = '''\
def make_points(n):
    out = []
    for i in range(n):
        out.append(i)
    return out
'''

S = "minipkg/stats.py"
T = "minipkg/textfmt.py"
MEAN_INTS, MEAN_FLOATS = "tests/test_stats.py::test_mean_ints", "tests/test_stats.py::test_mean_floats"
SPREAD, SPREAD1 = "tests/test_stats.py::test_spread", "tests/test_stats.py::test_spread_single"
IDENT, TITLE, SHOUT = "tests/test_stats.py::test_ident", "tests/test_textfmt.py::test_title_words", \
    "tests/test_textfmt.py::test_shout"
PT = "tests/test_point.py::test_point"


def _profile(root: Path, failing: tuple[str, ...] = ()) -> SimpleNamespace:
    make_mini_project(root, {"minipkg/point.py": POINT, "minipkg/testing.py": TESTING})
    spec = detect_env(root, name_hint="minipkg")
    index = build_index(root, spec)
    lines = {
        S: {4: [MEAN_INTS, MEAN_FLOATS, SPREAD], 6: [MEAN_INTS, MEAN_FLOATS], 7: [MEAN_INTS, MEAN_FLOATS],
            8: [MEAN_INTS, MEAN_FLOATS], 9: [MEAN_INTS, MEAN_FLOATS],
            14: [SPREAD, SPREAD1], 15: [SPREAD, SPREAD1], 16: [SPREAD, SPREAD1], 20: [IDENT]},
        T: {6: [TITLE], 7: [TITLE], 12: [SHOUT], 13: [SHOUT]},
        "minipkg/point.py": {3: [PT], 4: [PT], 7: [PT], 8: [PT], 12: [PT], 13: [PT]},
        "minipkg/testing.py": {2: [PT], 3: [PT], 4: [PT], 5: [PT]},
    }
    tests = {t for per in lines.values() for ids in per.values() for t in ids}
    report = TestReport(tuple(Result(t, Outcome.FAILED if t in failing else Outcome.PASSED)
                              for t in sorted(tests)), 0, 1.0)
    return SimpleNamespace(entities=index.entities, index=index, baseline=compute_baseline([report]),
                           coverage=CoverageMap.from_contexts(lines))


def _strategies(*names: str) -> list:
    known = all_strategies()
    return [known[n] for n in names]


def test_skip_reasons_are_the_right_ones(tmp_path):
    cands, rejected = propose(_profile(tmp_path), _strategies("stub", "delete", "module"))
    why = {r.candidate_id: r.reason for r in rejected}
    assert why["stub:minipkg.stats.untested"] is RejectReason.NO_COVERING_TESTS
    assert why["stub:minipkg.stats.ident"] is RejectReason.TRIVIAL_BODY
    assert why["delete:minipkg.point.Point.__eq__"] is RejectReason.DUNDER_METHOD
    assert why["stub:minipkg.testing.make_points"] is RejectReason.TEST_ONLY_CODE
    assert why["module:minipkg.testing"] is RejectReason.TEST_ONLY_CODE
    ids = {c.candidate_id for c in cands}
    assert {"stub:minipkg.stats.mean", "delete:minipkg.stats.mean", "module:minipkg.textfmt",
            "stub:minipkg.point.Point.norm"} <= ids
    assert not ids & set(why)  # a skipped entity is never also a candidate


def test_entities_in_files_the_runner_imports_are_skipped(tmp_path):
    """A project pytest itself imports: nothing in ``EnvSpec.runner_files`` is proposed (RUNNER_MODULE)."""
    prof = _profile(tmp_path)
    prof.spec = SimpleNamespace(runner_files=(S,))
    cands, rejected = propose(prof, _strategies("stub", "delete"))
    why = {r.candidate_id: r.reason for r in rejected}
    assert why["stub:minipkg.stats.mean"] is RejectReason.RUNNER_MODULE
    assert not any(c.entity.startswith("minipkg.stats.") for c in cands)
    assert any(c.entity == "minipkg.point.Point.norm" for c in cands)


def test_covering_tests_are_those_that_run_the_body_not_the_def_line(tmp_path):
    cands, _ = propose(_profile(tmp_path), _strategies("stub"))
    mean = next(c for c in cands if c.entity == "minipkg.stats.mean")
    assert mean.covering_tests == (MEAN_FLOATS, MEAN_INTS)  # SPREAD only ran line 4 (the def)
    module = next(c for c in propose(_profile(tmp_path / "b"), _strategies("module"))[0]
                  if c.entity == "minipkg.textfmt")
    assert set(module.covering_tests) == {TITLE, SHOUT}


def test_unreliable_tests_do_not_cover(tmp_path):
    _, rejected = propose(_profile(tmp_path, failing=(TITLE,)), _strategies("stub"))
    assert any(r.candidate_id == "stub:minipkg.textfmt.title_words" and r.reason is RejectReason.NO_COVERING_TESTS
               for r in rejected)


def test_rank_order_is_recorded_and_deterministic(tmp_path):
    prof = _profile(tmp_path)
    cands, _ = propose(prof, _strategies("stub", "delete"), seed=3)
    again, _ = propose(prof, _strategies("stub", "delete"), seed=3)
    assert [c.candidate_id for c in cands] == [c.candidate_id for c in again]
    assert [c.rank for c in cands] == sorted((c.rank for c in cands), reverse=True)
    mean = next(c for c in cands if c.candidate_id == "stub:minipkg.stats.mean")
    assert "2 covering tests" in mean.why and "statements" in mean.why
    # more tests and more code rank higher: mean (2 tests, loop) above shout (1 test, 2 statements)
    shout = next(c for c in cands if c.candidate_id == "stub:minipkg.textfmt.shout")
    assert mean.rank > shout.rank


def test_interleave_round_robins_strategies_in_rank_order(tmp_path):
    cands, _ = propose(_profile(tmp_path), _strategies("stub", "delete", "module"))
    order = interleave(cands, ("stub", "delete", "module"))
    assert sorted(c.candidate_id for c in order) == sorted(c.candidate_id for c in cands)
    assert order[0].strategy == "stub" and {c.strategy for c in order[:3]} >= {"stub", "module"}
    for strategy in ("stub", "delete", "module"):  # each strategy in rank order among its own
        firsts = [c for c in order if c.strategy == strategy and c in order[:len({x.entity for x in order})]]
        assert firsts == [c for c in cands if c in firsts]


def test_interleave_tries_every_entity_before_any_twin(tmp_path):
    cands, _ = propose(_profile(tmp_path), _strategies("stub", "delete", "module"))
    order = interleave(cands, ("stub", "delete", "module"))
    entities = [c.entity for c in order]
    n = len(set(entities))
    assert len(entities) > n, "the toy repo must have stub/delete twins for this test to mean anything"
    assert len(set(entities[:n])) == n  # every entity once, then the twins
    assert set(entities[n:]) <= set(entities[:n])


def _c(cid: str, tests: tuple[str, ...], rank: float) -> Candidate:
    strategy, entity = cid.split(":", 1)
    return Candidate(cid, strategy, entity, tests, rank, "")


def test_candidates_whose_tests_take_most_of_a_slow_suite_go_last() -> None:
    """networkx's first candidates by rank were Graph and utils.backends, 6,000+ covering tests each: every
    validation run of them cost a whole suite (the first took 92 s and was rejected)."""
    durations = {f"t.py::t{i}": 1.0 for i in range(200)}  # a 200 s suite
    core = _c("stub:pkg.Graph", tuple(durations), 30.0)  # every test
    half = _c("module:pkg.views", tuple(list(durations)[:100]), 25.0)  # 100 s of it
    small = _c("stub:pkg.helper", ("t.py::t0", "t.py::t1"), 10.0)
    small_module = _c("module:pkg.util", ("t.py::t2",), 9.0)
    assert costly([core, half, small, small_module], durations) == {"stub:pkg.Graph", "module:pkg.views"}
    order = interleave([core, half, small, small_module], ("stub", "module"),
                       last=costly([core, half, small, small_module], durations))
    assert [c.candidate_id for c in order] == ["stub:pkg.helper", "module:pkg.util", "stub:pkg.Graph",
                                               "module:pkg.views"]  # deferred, never dropped
    # the others keep their order: deferring a costly candidate never changes which twin of an entity goes first
    # (interleaved anew, more-itertools' delete twins came before their stubs and broke its test file's import)
    twins = [_c("stub:pkg.a", ("t.py::t0",), 10.0), _c("delete:pkg.b", tuple(durations), 20.0),
             _c("stub:pkg.c", ("t.py::t1",), 9.0), _c("delete:pkg.c", ("t.py::t1",), 8.0)]
    plain = interleave(twins, ("stub", "delete"))
    deferred = interleave(twins, ("stub", "delete"), last=costly(twins, durations))
    assert [c.candidate_id for c in deferred] == [c.candidate_id for c in plain if c.entity != "pkg.b"] + [
        "delete:pkg.b"]
    assert [c.candidate_id for c in deferred][:2] == ["stub:pkg.a", "stub:pkg.c"]
    # a suite of under 30 s of tests is never reordered, whatever share a candidate covers
    quick = {k: 0.1 for k in durations}
    assert costly([core, half, small], quick) == frozenset()
    assert [c.candidate_id for c in interleave([core, half, small], ("stub", "module"))][0] == "stub:pkg.Graph"
