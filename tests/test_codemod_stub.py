"""Golden before/after tests of the `stub` codemod."""

from __future__ import annotations

from pathlib import Path

import pytest

from generators.deletion import Deletion
from generators.static_index import StaticIndex, build_index
from generators.strategy_stub import StubStrategy
from taskforge.core import patches
from taskforge.core.environment import EnvSpec
from taskforge.core.outcomes import Rejected, RejectReason

INIT = 'from .core import area, Shape\n\n__all__ = ["area", "Shape"]\n'
CORE = '''"""Core."""
import math
import os  # used elsewhere

from pkg.util import clamp


def area(r: float) -> float:
    """Area of a circle."""
    # squared radius
    return math.pi * clamp(r) ** 2


def keep(x):   # unrelated
    return  os.path.join( x ,"y" )   # odd spacing stays


class Shape:
    """A shape."""

    def __init__(self, r):
        self.r = r

    @property
    def size(self) -> float:
        return area(self.r)

    def already(self):
        raise NotImplementedError


def one_liner(x): return x + 1
'''
UTIL = "def clamp(x):\n    return max(0, x)\n"
SPEC = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",))


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, StaticIndex]:
    root = tmp_path / "repo"
    patches.write_tree({"pkg/__init__.py": INIT, "pkg/core.py": CORE, "pkg/util.py": UTIL}, root)
    return root, build_index(root, SPEC)


def _roundtrip(root: Path, d: Deletion, tmp: Path) -> None:
    """setup diff then gold diff through real `git apply` gives back the original bytes."""
    work = tmp / "work"
    patches.write_tree(patches.read_tree(root), work)
    patches.apply(d.setup_diff, work)
    for rel, text in d.files_after.items():
        assert patches.read_tree(work, [rel])[rel] == text
    patches.apply(d.gold_diff, work)
    assert patches.read_tree(work) == patches.read_tree(root)


def test_stub_function_keeps_signature_docstring_and_unrelated_bytes(repo, tmp_path: Path) -> None:
    root, index = repo
    d = StubStrategy().delete(index.entity("pkg.core.area"), index, root)
    assert isinstance(d, Deletion), d
    assert d.files_after == {"pkg/core.py": CORE.replace(
        'import math\n', '').replace('\nfrom pkg.util import clamp\n', '').replace(
        '    # squared radius\n    return math.pi * clamp(r) ** 2\n', '    raise NotImplementedError\n')}
    assert d.deleted == ("pkg.core.area",) and d.strategy == "stub"
    assert d.statements_deleted == 1 and d.fan_out == 1 and d.files_touched == 1
    assert d.fan_in == 1  # Shape.size still calls it
    _roundtrip(root, d, tmp_path)


def test_stub_class_stubs_every_method_not_the_stubs(repo) -> None:
    root, index = repo
    d = StubStrategy().delete(index.entity("pkg.core.Shape"), index, root)
    assert isinstance(d, Deletion), d
    after = d.files_after["pkg/core.py"]
    assert set(d.deleted) == {"pkg.core.Shape.__init__", "pkg.core.Shape.size"}
    assert "    def __init__(self, r):\n        raise NotImplementedError\n" in after
    assert "    @property\n    def size(self) -> float:\n        raise NotImplementedError\n" in after
    assert '    """A shape."""\n' in after
    # only the class changed: the rest of the file is identical
    assert after.split("class Shape")[0] == CORE.split("class Shape")[0]


def test_one_line_function(repo) -> None:
    root, index = repo
    d = StubStrategy().delete(index.entity("pkg.core.one_liner"), index, root)
    assert isinstance(d, Deletion)
    assert d.files_after["pkg/core.py"].endswith("\n\ndef one_liner(x): raise NotImplementedError\n")


def test_noop_already_a_stub_is_rejected_and_nothing_changes(repo) -> None:
    root, index = repo
    before = patches.read_tree(root)
    out = StubStrategy().delete(index.entity("pkg.core.Shape.already"), index, root)
    assert isinstance(out, Rejected) and out.reason is RejectReason.TRIVIAL_BODY
    assert patches.read_tree(root) == before


def test_applies_to() -> None:
    s = StubStrategy()
    assert s.name == "stub" and s.tier == 0


def test_stub_of_code_that_runs_at_import_is_rejected(tmp_path: Path) -> None:
    files = {"m/__init__.py": '''def _table():
    return {"a": 1}


def deco(fn):
    return fn


def _build():
    return _table()


TABLE = _build()


@deco
def user():
    return TABLE["a"]


def free():
    return 1
'''}
    patches.write_tree(files, tmp_path)
    index = build_index(tmp_path, EnvSpec("m", "3.11", ".", package_dirs=("m",)))
    assert {"m._build", "m._table", "m.deco"} <= index.import_time_entities()
    for q in ("m._build", "m._table", "m.deco"):
        out = StubStrategy().delete(index.entity(q), index, tmp_path)
        assert isinstance(out, Rejected) and out.reason is RejectReason.IMPORT_BROKEN, q
    assert isinstance(StubStrategy().delete(index.entity("m.user"), index, tmp_path), Deletion)
    assert isinstance(StubStrategy().delete(index.entity("m.free"), index, tmp_path), Deletion)


def test_a_class_named_as_a_default_value_is_not_run_at_import(tmp_path: Path) -> None:
    """pycparser 3.12: ``def __init__(self, lexer: type[CLexer] = CLexer)`` evaluates the name and constructs no
    lexer; the class was refused ``import_broken`` (its constructor counted as run at import). A decorator in
    a header still runs (and a header with decorators keeps every name, as before)."""
    files = {"m/__init__.py": '''class Lexer:
    def __init__(self):
        self.pos = 0
        self.tokens = []


def deco(fn):
    return fn


class Parser:
    def __init__(self, lexer: type[Lexer] = Lexer):
        self.lex = lexer()

    @deco
    def parse(self, text=""):
        return self.lex
'''}
    patches.write_tree(files, tmp_path)
    index = build_index(tmp_path, EnvSpec("m", "3.11", ".", package_dirs=("m",)))
    at_import = index.import_time_entities()
    assert "m.deco" in at_import  # the decorator runs
    assert "m.Lexer" not in at_import and "m.Lexer.__init__" not in at_import
    assert isinstance(StubStrategy().delete(index.entity("m.Lexer"), index, tmp_path), Deletion)
