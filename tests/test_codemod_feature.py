"""Golden before/after tests of the `feature` strategy: grouping by tests, deletion across files."""

from __future__ import annotations

from pathlib import Path

import pytest
from feature_fixtures import GEO, INIT, REGISTRY, UNITS, make_profile

from generators.deletion import Deletion
from generators.feature_groups import FeatureBounds, collection_needs, group_key, group_tests
from generators.problem_statement import write_statement
from generators.strategy_feature import FeatureStrategy, feature_index
from taskforge.core.outcomes import Rejected, RejectReason


@pytest.fixture()
def profile(tmp_path: Path):
    return make_profile(tmp_path / "repo")


def test_group_keys_by_class_and_module() -> None:
    assert group_key("t/test_a.py::TestX::test_y[1-2]", "class") == "t/test_a.py::TestX"
    assert group_key("t/test_a.py::test_y[a::b]", "class") == "t/test_a.py"
    groups = group_tests(["t/a.py::C::t1", "t/a.py::t2"])
    assert groups == {"t/a.py": frozenset({"t/a.py::C::t1", "t/a.py::t2"}), "t/a.py::C": frozenset({"t/a.py::C::t1"})}


def test_feature_is_the_code_only_its_tests_reach(profile) -> None:
    f = feature_index(profile).feature("tests/test_geo.py")
    assert f is not None
    assert set(f.entities) == {"pkg.geo._square", "pkg.geo.area", "pkg.geo.Circle", "pkg.geo.Circle.__init__",
                               "pkg.geo.Circle.big", "pkg.units.area_cm"}
    assert f.interface == ("pkg.geo._square", "pkg.geo.area", "pkg.geo.Circle", "pkg.units.area_cm")
    assert f.files == ("pkg/geo.py", "pkg/units.py") and f.anchor == "pkg.geo.Circle"
    # registry.register is used at module level (the decorator call), perimeter by other tests: they stay
    assert "pkg.registry.register" not in f.entities and "pkg.geo.perimeter" not in f.entities


def test_deletion_across_files_with_decorators_reexports_all_and_dead_imports(profile) -> None:
    strategy = FeatureStrategy(FeatureBounds())
    cand = next(c for c in strategy.propose(profile) if c.candidate_id == "feature:tests/test_geo.py")
    d = strategy.delete_candidate(cand, profile)
    assert isinstance(d, Deletion), d
    assert d.strategy == "feature" and d.target == "pkg.geo.Circle"
    assert set(d.files_after) == {"pkg/__init__.py", "pkg/geo.py", "pkg/units.py"}  # registry.py untouched
    assert d.files_after["pkg/__init__.py"] == '''"""Package."""
from .geo import perimeter
from .units import label

__all__ = ["label", "perimeter"]
'''
    # the decorated (registering) def, the class with its decorated method, the helper and the imports
    # only they used go; the rest keeps its exact bytes
    assert d.files_after["pkg/geo.py"] == '''"""Geometry."""
import math


def perimeter(r):
    """Perimeter of a circle."""
    return 2 * math.pi * r
'''
    assert d.files_after["pkg/units.py"] == UNITS[UNITS.index("\n\ndef label"):]
    assert d.files_before == {"pkg/__init__.py": INIT, "pkg/geo.py": GEO, "pkg/units.py": UNITS}
    assert GEO[GEO.index("def perimeter"):GEO.index("class Circle")].rstrip() in d.files_after["pkg/geo.py"]
    assert REGISTRY == (profile.repo_dir / "pkg/registry.py").read_text()
    assert d.extra["interface"] == ["pkg.geo._square", "pkg.geo.area", "pkg.geo.Circle", "pkg.units.area_cm"]
    assert d.files_touched == 3 and d.lines_deleted > 20


def test_statement_lists_every_interface_and_no_body(profile) -> None:
    strategy = FeatureStrategy(FeatureBounds())
    cand = next(c for c in strategy.propose(profile) if c.candidate_id == "feature:tests/test_geo.py")
    d = strategy.delete_candidate(cand, profile)
    assert isinstance(d, Deletion)
    text = write_statement(d, profile.index, profile.repo_dir, repo="pkg")
    for needle in ("`pkg.geo.area` (function in `pkg/geo.py`)", '@register("area")\ndef area(r)',
                   "Area of a circle of radius", "`pkg.geo.Circle` (class in `pkg/geo.py`)", "def big(self)",
                   "`pkg.units.area_cm` (function in `pkg/units.py`)", "`pkg.geo._square`"):
        assert needle in text, needle
    for body in ("math.pi * _square", "* 10000", "x * x", "radius must not be negative"):
        assert body not in text


def test_no_op_group_proposes_nothing_and_rejects(tmp_path: Path) -> None:
    # every entity the geo tests reach is also reached by another test: no feature of its own
    shared = ("tests/test_geo.py::test_area", "tests/test_other.py::test_perimeter")
    covers = {"pkg.geo.area": shared, "pkg.geo._square": shared, "pkg.geo.perimeter": shared}
    profile = make_profile(tmp_path / "repo", covers)
    strategy = FeatureStrategy(FeatureBounds(min_entities=1))
    assert feature_index(profile).feature("tests/test_geo.py") is None
    assert not [c for c in strategy.propose(profile) if c.candidate_id == "feature:tests/test_geo.py"]
    from generators.candidates import Candidate

    out = strategy.delete_candidate(Candidate("feature:tests/test_geo.py", "feature", "pkg.geo.area", (), 0, ""), profile)
    assert isinstance(out, Rejected) and out.reason is RejectReason.NO_COVERING_TESTS
    # and the strategy never claims single entities
    assert not any(strategy.applies_to(e) for e in profile.index.entities)


def test_bounds_filter_features(profile) -> None:
    fidx = feature_index(profile)
    assert {f.key for f in fidx.features(FeatureBounds(min_entities=2))} == {"tests/test_geo.py", "tests/test_other.py"}
    assert {f.key for f in fidx.features(FeatureBounds(min_entities=2, max_files=1))} == set()
    assert {f.key for f in fidx.features(FeatureBounds(min_entities=4, max_lines=10))} == set()
    one = {f.key for f in fidx.features(FeatureBounds(min_entities=1))}
    assert "reach:pkg.geo.Circle" in one and "reach:pkg.units.label" in one


STAR_FILES = {
    "pkg/__init__.py": "from .core import *\n",
    "pkg/core.py": '__all__ = ["f", "g"]\n\n\ndef f(x):\n    y = x + 1\n    return y\n\n\ndef g(x):\n    y = x * 2\n    return y\n',
    "pkg/user.py": "from pkg import f\n\n\ndef use(x):\n    z = f(x)\n    return z\n",
    "pkg/shapes.py": '''import abc


class Base(abc.ABC):
    @abc.abstractmethod
    def make(self):
        ...


class Impl(Base):
    def make(self):
        v = 1
        return v

    def extra(self):
        v = 2
        return v
''',
    "tests/test_core.py": "from pkg import f, g\n\n\ndef test_f():\n    assert f(1) == 2\n\n\ndef test_g():\n    assert g(1) == 2\n",
    "tests/test_shapes.py": "from pkg.shapes import Impl\n\nIMPL = Impl()\n\n\ndef test_make():\n    assert IMPL.make() == 1\n\n\n"
                            "def test_extra():\n    assert IMPL.extra() == 2\n",
    "tests/test_other.py": "from pkg.shapes import Impl\n\n\ndef test_impl():\n    assert Impl().make() == 1\n",
}


def test_star_reexports_abstract_methods_and_collection_time_code_are_kept(tmp_path: Path) -> None:
    f_, g_ = "tests/test_core.py::test_f", "tests/test_core.py::test_g"
    make_, extra_, other_ = ("tests/test_shapes.py::test_make", "tests/test_shapes.py::test_extra",
                             "tests/test_other.py::test_impl")
    covers = {"pkg.core.f": (f_,), "pkg.core.g": (g_,), "pkg.user.use": (), "pkg.shapes.Impl.make": (make_, other_),
              "pkg.shapes.Impl.extra": (extra_,)}
    profile = make_profile(tmp_path / "repo", covers, STAR_FILES)
    fidx = feature_index(profile)
    # pkg.user imports f through the package's ``import *``: the index resolves the star chain, so f is
    # pinned by a resolved use (no longer an unresolved name); g may go
    assert fidx.feature("tests/test_core.py").entities == ("pkg.core.g",)
    assert any(r.file == "pkg/user.py" and r.in_entity == "pkg.user.use"
               for r in profile.index.entity("pkg.core.f").references)
    assert "f" not in fidx.unresolved
    # Impl() at test_shapes' top level runs Impl (its construction) for every test there
    assert "pkg.shapes.Impl" in collection_needs(profile.index)["tests/test_shapes.py"]
    # Impl.make implements an abstract method: never alone (Impl would turn abstract); extra may go
    assert fidx.feature("reach:pkg.shapes.Impl.make") is None
    assert fidx.feature("reach:pkg.shapes.Impl.extra").entities == ("pkg.shapes.Impl.extra",)
