"""Composition: k deletions of one repository as one deletion, and how the parts are chosen."""

from __future__ import annotations

from pathlib import Path

import pytest
from feature_fixtures import GEO, UNITS, make_profile

from generators.candidates import Candidate
from generators.deletion import Deletion
from generators.difficulty import difficulty_of, tier_of
from generators.strategy_compose import ComposeStrategy, compose_id, part_ids
from generators.strategy_delete import DeleteStrategy
from taskforge.core.outcomes import Rejected, RejectReason
from taskforge.pipeline.compose import compositions


def test_part_ids_round_trip() -> None:
    ids = ["delete:pkg.geo.perimeter", "feature:tests/test_geo.py"]
    assert part_ids(compose_id(ids)) == ids


@pytest.fixture()
def profile(tmp_path: Path):
    return make_profile(tmp_path / "repo")


def test_composed_deletion_is_both_deletions(profile) -> None:
    ids = ["delete:pkg.units.label", "delete:pkg.geo.perimeter"]
    cand = Candidate(compose_id(ids), "compose", "pkg.units.label", (), 0.0, "")
    d = ComposeStrategy().delete_candidate(cand, profile)
    assert isinstance(d, Deletion), d
    assert set(d.deleted) == {"pkg.units.label", "pkg.geo.perimeter"}
    # both parts edit the same import lines and the same one-line __all__ of __init__.py: one pass
    assert d.files_after["pkg/__init__.py"].splitlines()[1:5] == ["from .geo import Circle, area",
                                                                  "from .units import area_cm", "",
                                                                  '__all__ = ["Circle", "area", "area_cm"]']
    assert '"label"' not in d.files_after["pkg/__init__.py"] and '"perimeter"' not in d.files_after["pkg/__init__.py"]
    assert "def perimeter" not in d.files_after["pkg/geo.py"] and "def area" in d.files_after["pkg/geo.py"]
    assert d.files_after["pkg/units.py"] == UNITS[: UNITS.index("\n\n\ndef label")] + "\n"  # the rest: same bytes
    singles = [DeleteStrategy().delete(profile.index.entity(q), profile.index, profile.repo_dir)
               for q in ("pkg.units.label", "pkg.geo.perimeter")]
    assert d.statements_deleted == sum(s.statements_deleted for s in singles if isinstance(s, Deletion))
    assert d.extra["k"] == 2 and tier_of(d) == 4
    assert difficulty_of(d, 2).tier == 4 and difficulty_of(d, 2).score >= max(difficulty_of(s, 1).score
                                                                             for s in singles if isinstance(s, Deletion))


def test_composition_with_a_feature_and_refusals(profile) -> None:
    ok = ComposeStrategy().delete_candidate(Candidate(compose_id(["feature:tests/test_other.py", "delete:pkg.geo.area"]),
                                                      "compose", "", (), 0.0, ""), profile)
    assert isinstance(ok, Deletion), ok  # a feature and a deletion (with its recorded dependents) in one
    assert {"pkg.geo.perimeter", "pkg.units.label", "pkg.geo.area", "pkg.units.area_cm"} <= set(ok.deleted)
    assert ok.extra["part_strategies"] == ["feature", "delete"] and tier_of(ok) == 4
    same = ComposeStrategy().delete_candidate(Candidate(compose_id(["feature:tests/test_other.py",
                                                                    "delete:pkg.geo.perimeter"]),
                                                        "compose", "", (), 0.0, ""), profile)
    assert isinstance(same, Rejected) and same.reason is RejectReason.DUPLICATE
    stub = ComposeStrategy().delete_candidate(Candidate(compose_id(["stub:pkg.geo.area", "delete:pkg.units.label"]),
                                                        "compose", "", (), 0.0, ""), profile)
    assert isinstance(stub, Rejected) and "cannot be a part" in stub.detail
    assert GEO == (profile.repo_dir / "pkg/geo.py").read_text()  # the tree is only read


def test_compositions_pick_disjoint_parts(tmp_path: Path) -> None:
    from taskforge.core.task import Difficulty, Task

    def task(i: int, strategy: str, entities: tuple[str, ...]) -> Task:
        diff = Difficulty(1, 1, 1, 1, 1, 0, 0, 1, 1, 0.1 * i)
        return Task(instance_id=f"r-{i}", repo="r", source="s", base_commit="c", version="1", created_at="",
                    strategy=strategy, entities=entities, setup_patch="", patch="", test_patch="",
                    problem_statement="", fail_to_pass=(f"t.py::test_{i}",), pass_to_pass=("t.py::p",),
                    env_spec=None, difficulty=diff,  # type: ignore[arg-type]
                    provenance={"candidate": {"candidate_id": f"{strategy}:{entities[0]}"}})

    tasks = [task(1, "delete", ("a",)), task(2, "delete", ("b",)), task(3, "feature", ("a", "c")),
             task(4, "stub", ("d",))]
    cands = compositions(tasks, 2, seed=0, limit=10)
    ids = {c.candidate_id for c in cands}
    assert all("stub:" not in i for i in ids)
    assert compose_id(["delete:a", "feature:a"]) not in ids  # overlapping entities
    assert compose_id(["delete:a", "delete:b"]) in ids
    assert all(set(c.covering_tests) == {n for t in tasks for n in t.fail_to_pass if t.provenance["candidate"]
                                         ["candidate_id"] in part_ids(c.candidate_id)} for c in cands)
    assert compositions(tasks, 2, seed=0, limit=10) == cands  # deterministic


def test_a_module_part_removes_the_file_and_its_imports(profile) -> None:
    ids = ["module:pkg.units", "delete:pkg.geo.perimeter"]
    d = ComposeStrategy().delete_candidate(Candidate(compose_id(ids), "compose", "", (), 0.0, ""), profile)
    assert isinstance(d, Deletion), d
    assert d.files_after["pkg/units.py"] is None
    assert d.files_after["pkg/__init__.py"] == '"""Package."""\nfrom .geo import Circle, area\n\n__all__ = ["Circle", "area"]\n'
    assert "def perimeter" not in d.files_after["pkg/geo.py"] and d.extra["part_strategies"] == ["module", "delete"]
