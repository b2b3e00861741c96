"""Entities used at import time by test modules (class bodies, module-level schemas) cover their tests."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

from generators.candidates import covering_tests
from generators.import_time import files_broken_by_removal, import_time_users
from generators.static_index import build_index
from taskforge.core.environment import EnvSpec
from taskforge.profile.coverage_map import CoverageMap

PKG = '''\
class Field:
    def __init__(self, kind):
        self.kind = kind


class ListField(Field):
    def load(self, items):
        out = [self.kind(i) for i in items]
        return out


def helper(x):
    y = x + 1
    return y
'''

BASE = '''\
from pkg import ListField


class BlogSchema:
    tags = ListField(str)
'''

TEST_BLOG = '''\
from tests.base import BlogSchema


def test_blog():
    assert BlogSchema.tags.kind is str
'''

TEST_OTHER = '''\
from pkg import helper


def test_helper():
    assert helper(1) == 2


def test_inside_function_only():
    from pkg import ListField
    assert ListField(int).load(["1"]) == [1]
'''


def _tree(root: Path) -> tuple[object, Path]:
    files = {"pkg/__init__.py": PKG, "tests/base.py": BASE, "tests/test_blog.py": TEST_BLOG,
             "tests/test_other.py": TEST_OTHER}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    spec = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",), test_paths=("tests",))
    return build_index(root, spec), root


def test_a_class_body_use_in_a_helper_module_reaches_its_importers(tmp_path: Path) -> None:
    index, root = _tree(tmp_path)
    users = import_time_users(index, root)
    assert users["pkg.ListField"] == {"tests/base.py", "tests/test_blog.py"}  # not test_other: inside a function
    assert "pkg.helper" not in users  # called only inside test functions
    assert files_broken_by_removal(index, root, ("pkg.ListField",)) == {"tests/base.py", "tests/test_blog.py"}
    assert files_broken_by_removal(index, root, ()) == frozenset()


def test_import_time_users_count_as_covering_tests(tmp_path: Path) -> None:
    index, root = _tree(tmp_path)
    reliable = frozenset({"tests/test_blog.py::test_blog", "tests/test_other.py::test_helper",
                          "tests/test_other.py::test_inside_function_only"})
    profile = SimpleNamespace(index=index, repo_dir=root, coverage=CoverageMap({}),
                              baseline=SimpleNamespace(reliable=reliable))
    # no per-test coverage at all: the schema in tests/base.py still makes test_blog cover ListField
    assert covering_tests(index.entity("pkg.ListField"), profile) == {"tests/test_blog.py::test_blog"}
    assert covering_tests(index.entity("pkg.helper"), profile) == frozenset()


MIXIN = '''\
import pkg


class HelperMixin:
    function = pkg.helper
    kind = pkg.ListField


class TestHelper(HelperMixin):
    def test_it(self):
        assert self.function(1) == 2
'''


def test_a_bare_binding_is_a_use_for_a_deletion_not_for_a_stub(tmp_path: Path) -> None:
    """more-itertools 11.2.1: ``cls = mi.seekable`` in a mixin's class body made all 600 tests of
    tests/test_more.py cover ``seekable``. Binding the name runs nothing: a stub (the name stays) breaks no
    import there; a deletion (the name gone) does. A call at import time is a use for both."""
    index, root = _tree(tmp_path)
    (root / "tests" / "test_mixin.py").write_text(MIXIN)
    index = build_index(root, EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",), test_paths=("tests",)))
    users = import_time_users(index, root)
    stub_users = import_time_users(index, root, names_remain=True)
    assert "tests/test_mixin.py" in users["pkg.helper"] and "tests/test_mixin.py" in users["pkg.ListField"]
    assert "pkg.helper" not in stub_users  # only the binding in the mixin
    assert stub_users["pkg.ListField"] == {"tests/base.py", "tests/test_blog.py"}  # the call in BlogSchema
    reliable = frozenset({"tests/test_mixin.py::TestHelper::test_it", "tests/test_other.py::test_helper"})
    profile = SimpleNamespace(index=index, repo_dir=root, coverage=CoverageMap({}),
                              baseline=SimpleNamespace(reliable=reliable))
    assert covering_tests(index.entity("pkg.helper"), profile) == {"tests/test_mixin.py::TestHelper::test_it"}
    assert covering_tests(index.entity("pkg.helper"), profile, names_remain=True) == frozenset()


def test_what_a_coverage_run_saw_run_at_import_counts_where_static_analysis_cannot_see(tmp_path: Path) -> None:
    """ijson 3.6.0: ``enrich_backend(globals())`` runs ``globals()['_make_' + name](backend)`` at import; static
    analysis cannot follow the lookup, and intersecting with it dropped the 12 factories the coverage run saw
    run there: each was stubbed, and each stub broke every test of the backend (``suite_red_after_deletion``).
    What the run saw counts; a function the static closure names but no run saw at import does not."""
    from generators.strategy_stub import StubStrategy
    from taskforge.core.outcomes import Rejected, RejectReason

    pkg = '''\
def _make_gen(backend):
    def gen(x):
        return x + 1
    return gen


def enrich(backend):
    backend["gen"] = globals()["_make_" + "gen"](backend)


def configured():
    value = 1
    return value


def hook(x=configured()):
    y = x * 2
    return y


enrich(globals())
'''
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(pkg)
    spec = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",), test_paths=("tests",))
    index = build_index(tmp_path, spec)
    assert "pkg._make_gen" not in index.import_time_entities()  # the lookup is invisible statically
    assert "pkg.configured" in index.import_time_entities()  # a default value, called at import
    index.observe_import_time(["pkg._make_gen", "pkg.enrich", "not.an.entity"])
    at_import = index.import_time_entities()
    assert {"pkg._make_gen", "pkg.enrich"} <= at_import
    assert "pkg.configured" not in at_import and "not.an.entity" not in at_import
    refused = StubStrategy().delete(index.entity("pkg._make_gen"), index, tmp_path)
    assert isinstance(refused, Rejected) and refused.reason is RejectReason.IMPORT_BROKEN
