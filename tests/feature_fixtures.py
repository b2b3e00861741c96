"""A tiny package whose tests group into features (for the feature and composition tests)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from generators.static_index import build_index
from taskforge.core import patches
from taskforge.core.environment import EnvSpec
from taskforge.core.testreport import Outcome, TestReport
from taskforge.core.testreport import TestResult as Result
from taskforge.profile.baseline import compute_baseline
from taskforge.profile.coverage_map import CoverageMap

INIT = '''"""Package."""
from .geo import Circle, area, perimeter
from .units import area_cm, label

__all__ = ["Circle", "area", "area_cm", "label", "perimeter"]
'''
GEO = '''"""Geometry."""
import functools
import math

from pkg.registry import register


def _square(x):
    return x * x


@register("area")
def area(r):
    """Area of a circle of radius ``r``."""
    return math.pi * _square(r)


def perimeter(r):
    """Perimeter of a circle."""
    return 2 * math.pi * r


class Circle:
    """A circle."""

    def __init__(self, r):
        self.r = r

    @functools.lru_cache(maxsize=None)
    def big(self):
        """Whether the area exceeds 10."""
        return area(self.r) > 10
'''
UNITS = '''from pkg.geo import area


def area_cm(r):
    """Area in square centimetres."""
    if r < 0:
        raise ValueError("radius must not be negative")
    return area(r) * 10000


def label(x):
    return f"{x} m"
'''
REGISTRY = '''REGISTRY = {}


def register(name):
    def deco(fn):
        REGISTRY[name] = fn
        return fn
    return deco
'''
TEST_GEO = '''import pytest

from pkg import Circle, area, area_cm


def test_area():
    assert area(1) > 3


def test_circle():
    assert Circle(2).big()


def test_area_cm():
    with pytest.raises(ValueError, match="radius must not be negative"):
        area_cm(-1)
    assert area_cm(1) > 30000
'''
TEST_OTHER = '''from pkg import label, perimeter


def test_perimeter():
    assert perimeter(1) > 6


def test_label():
    assert label(1) == "1 m"
'''
SPEC = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",))
FILES = {"pkg/__init__.py": INIT, "pkg/geo.py": GEO, "pkg/units.py": UNITS, "pkg/registry.py": REGISTRY,
         "tests/test_geo.py": TEST_GEO, "tests/test_other.py": TEST_OTHER}
GEO_TESTS = ("tests/test_geo.py::test_area", "tests/test_geo.py::test_circle", "tests/test_geo.py::test_area_cm")
COVERS = {
    "pkg.geo._square": GEO_TESTS, "pkg.geo.area": GEO_TESTS, "pkg.geo.Circle.__init__": GEO_TESTS[1:2],
    "pkg.geo.Circle.big": GEO_TESTS[1:2], "pkg.units.area_cm": GEO_TESTS[2:],
    "pkg.geo.perimeter": ("tests/test_other.py::test_perimeter",), "pkg.units.label": ("tests/test_other.py::test_label",),
    "pkg.registry.register": (), "pkg.registry.register.deco": (),
}


def make_profile(root: Path, covers: dict[str, tuple[str, ...]] | None = None,
                 files: dict[str, str] | None = None) -> SimpleNamespace:
    """The package under ``root`` and a profile-like value: index, baseline (all pass), coverage."""
    patches.write_tree(files or FILES, root)
    index = build_index(root, SPEC)
    lines: dict[str, dict[int, list[str]]] = {}
    for q, tests in (covers or COVERS).items():
        e = index.get(q)
        if e is None or not tests:
            continue
        for ln in range(e.body_start, e.body_end + 1):
            lines.setdefault(e.file, {}).setdefault(ln, []).extend(tests)
    all_tests = {t for ts in (covers or COVERS).values() for t in ts}
    report = TestReport(tuple(Result(t, Outcome.PASSED) for t in sorted(all_tests)), 0, 1.0)
    return SimpleNamespace(entities=index.entities, index=index, baseline=compute_baseline([report]),
                           coverage=CoverageMap.from_contexts(lines), repo_dir=root, spec=SPEC)
