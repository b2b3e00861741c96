"""The libcst static index on a small package the test writes itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generators.static_index import StaticIndex, build_index, is_test_file, unmeasured_files
from taskforge.core.entities import EntityKind
from taskforge.core.environment import EnvSpec

FILES = {
    "src/shop/__init__.py": '''"""Shop."""
from .cart import Cart, total
from . import pricing

__all__ = ["Cart", "total", "pricing"]
''',
    "src/shop/pricing.py": '''import math


def _round(x):
    return math.floor(x * 100) / 100


def discount(price, pct):
    """Apply a percentage discount."""
    if pct < 0 or pct > 100:
        raise ValueError(pct)
    return _round(price * (1 - pct / 100))
''',
    "src/shop/cart.py": '''from shop.pricing import discount


class Base:
    def describe(self):
        return type(self).__name__


class Cart(Base):
    """A cart."""

    def __init__(self):
        self.items = []

    @property
    def size(self):
        return len(self.items)

    def add(self, price, pct=0):
        """Add an item."""
        self.items.append(discount(price, pct))
        return self.describe()


def total(cart):
    return sum(x for x in cart.items if x > 0)
''',
    "src/shop/tests/test_inner.py": "def test_x():\n    assert True\n",
    "tests/test_cart.py": '''import shop
from shop.cart import Cart


def test_add():
    c = Cart()
    c.add(10, 50)
    assert shop.total(c) == 5
''',
    "setup.py": "from setuptools import setup\nsetup()\n",
    "docs/conf.py": "x = 1\n",
}

SPEC = EnvSpec(project_name="shop", python="3.11", install_target=".", src_roots=("src",),
               package_dirs=("src/shop",), test_paths=("tests",))


@pytest.fixture()
def index(tmp_path: Path) -> StaticIndex:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return build_index(tmp_path, SPEC)


def test_entities_cover_modules_classes_functions_methods(index: StaticIndex) -> None:
    kinds = {e.qualname: e.kind for e in index.entities}
    assert kinds["shop"] is EntityKind.MODULE
    assert kinds["shop.pricing"] is EntityKind.MODULE
    assert kinds["shop.pricing.discount"] is EntityKind.FUNCTION
    assert kinds["shop.cart.Cart"] is EntityKind.CLASS
    assert kinds["shop.cart.Cart.add"] is EntityKind.METHOD
    assert index.source_files == ("src/shop/__init__.py", "src/shop/cart.py", "src/shop/pricing.py")
    assert "tests/test_cart.py" in index.test_files and "src/shop/tests/test_inner.py" in index.test_files
    assert not any(e.file in ("setup.py", "docs/conf.py") for e in index.entities)


def test_spans_signature_docstring_and_metrics(index: StaticIndex) -> None:
    d = index.entity("shop.pricing.discount")
    assert (d.start_line, d.body_start, d.body_end, d.end_line) == (8, 10, 12, 12)
    assert d.signature == "def discount(price, pct)"
    assert d.docstring == "Apply a percentage discount."
    assert d.statements == 3  # if, raise, return
    assert d.complexity == 3  # 1 + if + `or`
    size = index.entity("shop.cart.Cart.size")
    assert size.start_line == 15 and size.decorators == ("property",)
    assert index.entity("shop.pricing._round").is_private
    assert not index.entity("shop.cart.Cart.__init__").is_private


def test_references_resolve_imports_aliases_self_and_inheritance(index: StaticIndex) -> None:
    disc = index.entity("shop.pricing.discount")
    kinds = {(r.file, r.kind, r.in_entity, r.is_test) for r in disc.references}
    assert ("src/shop/cart.py", "import", "", False) in kinds
    assert ("src/shop/cart.py", "call", "shop.cart.Cart.add", False) in kinds
    # self.describe() resolves through the base class
    describe = {(r.kind, r.in_entity) for r in index.entity("shop.cart.Base.describe").references}
    assert ("call", "shop.cart.Cart.add") in describe
    # shop.total in the test resolves through the package re-export to shop.cart.total
    total = index.entity("shop.cart.total").references
    assert {(r.kind, r.is_test) for r in total} >= {("reexport", False), ("all", False), ("call", True)}
    assert index.dependencies("shop.pricing.discount") == ("shop.pricing._round",)
    assert index.dependents("shop.pricing._round") == ("shop.pricing.discount",)
    # the module is imported by the package __init__ and by cart.py
    mod_refs = {(r.file, r.kind) for r in index.referrers("shop.pricing")}
    assert ("src/shop/__init__.py", "reexport") in mod_refs and ("src/shop/cart.py", "import") in mod_refs


def test_dynamic_attribute_uses_are_marked(index: StaticIndex) -> None:
    refs = index.entity("shop.cart.Cart.add").references
    assert any(r.kind == "dynamic" and r.is_test and r.in_entity == "tests.test_cart.test_add" for r in refs)


def test_round_trip_through_json(index: StaticIndex) -> None:
    again = StaticIndex.from_dict(json.loads(json.dumps(index.to_dict())))
    assert again == index
    assert again.get("shop.cart.Cart.add") == index.get("shop.cart.Cart.add")
    assert [e.qualname for e in again.in_file("src/shop/pricing.py")] == [
        "shop.pricing", "shop.pricing._round", "shop.pricing.discount"]


def test_unparsable_file_is_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("def ok():\n    return 1\n")
    (tmp_path / "pkg/bad.py").write_text("print 'python 2'\n")
    idx = build_index(tmp_path, EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",)))
    assert "pkg.ok" in idx and len(idx.parse_errors) == 1 and idx.parse_errors[0].startswith("pkg/bad.py")


def test_test_file_classification() -> None:
    assert is_test_file("tests/helpers.py", SPEC)
    assert is_test_file("pkg/conftest.py", SPEC)
    assert is_test_file("test_inflection.py", SPEC)
    assert not is_test_file("src/shop/cart.py", SPEC)


def test_the_files_the_coverage_run_skips_hold_no_entity(tmp_path: Path) -> None:
    """Test files, in the package (networkx) or beside it, are not measured; every file an entity can lie in
    is (a helper module named like a test folder's sibling stays measured)."""
    files = {"pkg/__init__.py": "def ok():\n    return 1\n", "pkg/testing.py": "def helper():\n    return 2\n",
             "pkg/tests/__init__.py": "", "pkg/tests/test_a.py": "def test_a():\n    pass\n",
             "pkg/sub/test_b.py": "def test_b():\n    pass\n", "pkg/conftest.py": "", "tests/test_c.py": "",
             "pkg/sub/core.py": "def run():\n    return 3\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    spec = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",), test_paths=("tests",))
    skipped = set(unmeasured_files(tmp_path, spec))
    assert skipped == {"pkg/tests/__init__.py", "pkg/tests/test_a.py", "pkg/sub/test_b.py", "pkg/conftest.py",
                       "tests/test_c.py"}
    entity_files = {e.file for e in build_index(tmp_path, spec).entities}
    assert entity_files == {"pkg/__init__.py", "pkg/testing.py", "pkg/sub/core.py"} and not entity_files & skipped


def test_a_file_nested_too_deep_to_parse_is_left_out_not_the_whole_index(tmp_path: Path) -> None:
    """asttokens 3.0.2 ships test data with a 1,000+ deep expression: RecursionError in the literal mask (a
    recursive walk) and in the parsers failed the whole profile ("maximum recursion depth exceeded", 0 tasks)
    on held-out probe B."""
    from generators.literal_mask import mask_constant_literals

    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    deep = ("def chain(a):\n    return " + " + ".join(["a"] * 2000) + "\n\n\n"
            "TABLE = [" + ", ".join(str(i) for i in range(3000)) + "]\n")
    (tmp_path / "src/shop/deep.py").write_text(deep)
    masked = mask_constant_literals(deep)  # the iterative walk reaches the table below the deep chain
    assert "chain" in masked and "2999" not in masked
    index = build_index(tmp_path, SPEC)
    assert index.get("shop.cart.Cart") is not None  # the rest is indexed
    assert any(e.startswith("src/shop/deep.py: nested too deeply") for e in index.parse_errors), index.parse_errors


@pytest.mark.realrepo
@pytest.mark.slow
def test_asttokens_indexes_despite_its_deeply_nested_test_data(tmp_path: Path) -> None:
    from generators.env_detect import detect_env
    from generators.sources import resolve_source

    repo = resolve_source("pypi:asttokens==3.0.2", tmp_path / "work").path
    index = build_index(repo, detect_env(repo, python="3.11"))
    assert index.get("asttokens.asttokens.ASTTokens") is not None


def test_qualified_names_are_computed_for_the_names_asked_about_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """libcst's QualifiedNameProvider names every node of a file; the index asks its scopes for the names and
    attributes it records only (11 of 45 CPU-s on idna 3.20's 1.4 MB test file). A name bound both by an
    import and locally gets its candidates in one order, whatever the process's string hashes."""
    from libcst.metadata import QualifiedNameProvider

    from generators.index_visitor import index_file

    def everywhere(*_a: object, **_k: object) -> None:
        raise AssertionError("QualifiedNameProvider visited the whole file")

    monkeypatch.setattr(QualifiedNameProvider, "visit_Module", everywhere)
    src = ("try:\n    import fastjson\nexcept ImportError:\n    fastjson = None\n\n\n"
           "def dump(x):\n    return fastjson.dumps(x)\n")
    facts = index_file(src, "pkg/io.py", "pkg.io", False)
    assert not isinstance(facts, str)
    call = next(r for r in facts.refs if r.kind == "call" and r.attr == "dumps")
    assert call.candidates == ("fastjson.dumps", "pkg.io.fastjson.dumps")
