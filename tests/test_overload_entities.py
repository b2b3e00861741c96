"""A name defined several times in one scope: the entity is its implementation, and no edit leaves code behind.

Red team session 40, finding 3: the static index kept the first ``def`` of a qualified name, for an
overloaded one the first ``@overload`` declaration. The stub strategy "stubbed" that declaration and the
implementation stayed in the agent's workspace (itsdangerous 2.2.0 ``TimestampSigner.unsign``: 87 lines),
and the audit said clean: it fingerprinted the declaration. Here: the index
(``generators.redefinitions``), the stub and delete edits, coverage, and the audit's structural rule
(``taskforge.audit.live_defs``), on a toy package and on the real itsdangerous sdist.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from generators.deletion import Deletion
from generators.static_index import StaticIndex, build_index
from generators.strategy_delete import DeleteStrategy
from generators.strategy_stub import StubStrategy
from taskforge.audit.audit import audit_task_workspace
from taskforge.audit.fingerprints import entity_sources_in_tree
from taskforge.audit.live_defs import live_definitions
from taskforge.core import patches
from taskforge.core.definitions import named
from taskforge.core.entities import DefinitionRole
from taskforge.core.environment import EnvSpec
from taskforge.profile.coverage_map import CoverageMap

CORE = '''"""Overloads, a property with a setter, and one function per Python version."""
import sys
import typing as t
from typing import overload

import typing_extensions as te


@overload
def load(x: int) -> int: ...
@overload
def load(x: str) -> str: ...
def load(x):
    """Load x."""
    if isinstance(x, int):
        return x + 41
    return x.upper() + "!"


class Box:
    def __init__(self) -> None:
        self.items = [1, 2]

    @t.overload
    def get(self, k: int) -> int: ...
    @te.overload
    def get(self, k: str) -> str: ...
    def get(self, k):
        if isinstance(k, int):
            return k * 2 + len(self.items)
        return k * 3

    @property
    def size(self) -> int:
        return len(self.items) + 1

    @size.setter
    def size(self, v: int) -> None:
        self.items = [0] * v


def _by_text(v):
    return str(v)


if sys.version_info >= (3, 8):
    def compat(x):
        return sorted(x, key=_by_text)
else:
    def compat(x):
        return sorted(x, key=repr)
'''
FILE = "pkg/core.py"
SPEC = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",))
LOAD_BODY = 'return x.upper() + "!"'
GET_BODY = "return k * 2 + len(self.items)"


def _line(text: str, fragment: str, nth: int = 1) -> int:
    """1-based number of the ``nth`` line of ``text`` that contains ``fragment``."""
    hits = [i for i, ln in enumerate(text.splitlines(), 1) if fragment in ln]
    return hits[nth - 1]


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, StaticIndex]:
    root = tmp_path / "repo"
    patches.write_tree({"pkg/__init__.py": "", FILE: CORE}, root)
    return root, build_index(root, SPEC)


def _live(text: str, *path: str) -> list[int]:
    """Start lines of the definitions of ``path`` in ``text`` that still hold code."""
    return [d.start_line for d in named(ast.parse(text), path) if d.holds_code]


def _roundtrip(root: Path, d: Deletion, tmp: Path) -> None:
    """The setup diff then the gold diff, through ``git apply``, give back the original bytes."""
    work = tmp / "work"
    patches.write_tree(patches.read_tree(root), work)
    patches.apply(d.setup_diff, work)
    patches.apply(d.gold_diff, work)
    assert patches.read_tree(work) == patches.read_tree(root)


# --- the index --------------------------------------------------------------------------------------
def test_an_overloaded_function_or_method_is_its_implementation(repo) -> None:
    _root, index = repo
    load = index.entity("pkg.core.load")
    assert (load.start_line, load.end_line) == (_line(CORE, "def load(x):"), _line(CORE, LOAD_BODY))
    assert load.statements >= 3 and load.docstring == "Load x."
    assert [(o.role, o.start_line) for o in load.other_definitions] == [
        (DefinitionRole.OVERLOAD, _line(CORE, "@overload", 1)), (DefinitionRole.OVERLOAD, _line(CORE, "@overload", 2))]
    get = index.entity("pkg.core.Box.get")  # ``@t.overload`` and ``@te.overload`` alike
    assert get.start_line == _line(CORE, "def get(self, k):") and get.end_line == _line(CORE, "return k * 3")
    assert [o.role for o in get.other_definitions] == [DefinitionRole.OVERLOAD] * 2
    assert StaticIndex.from_dict(index.to_dict()).entity("pkg.core.Box.get") == get


def test_a_property_stays_its_getter_and_knows_its_setter(repo) -> None:
    _root, index = repo
    size = index.entity("pkg.core.Box.size")
    assert size.start_line == _line(CORE, "@property") and size.decorators == ("property",)
    assert [(o.role, o.start_line) for o in size.other_definitions] == [
        (DefinitionRole.ACCESSOR, _line(CORE, "@size.setter"))]
    assert size.alternates == () and len(size.body_spans) == 1


def test_branches_of_one_name_are_alternates_and_each_counts_for_coverage(repo) -> None:
    _root, index = repo
    compat = index.entity("pkg.core.compat")
    first, last = _line(CORE, "def compat(x):", 1), _line(CORE, "def compat(x):", 2)
    assert compat.start_line == last  # the last def binds the name when both run
    assert [(o.role, o.start_line) for o in compat.alternates] == [(DefinitionRole.ALTERNATE, first)]
    # this Python runs the first branch: the tests that ran it cover the entity
    ran = CoverageMap(lines={FILE: {first + 1: frozenset({"tests/test_c.py::test_compat"})}})
    assert ran.tests_for_entity(compat) == {"tests/test_c.py::test_compat"}
    # a call in the first branch's body is no call in the last def's header: nothing runs at import
    assert "pkg.core._by_text" not in index.import_time_entities()


# --- the edits ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("qualname", "body", "path"), [
    ("pkg.core.load", LOAD_BODY, ("load",)), ("pkg.core.Box.get", GET_BODY, ("Box", "get"))])
def test_a_stub_replaces_the_implementation_and_keeps_the_overloads(repo, tmp_path: Path, qualname: str,
                                                                     body: str, path: tuple[str, ...]) -> None:
    root, index = repo
    d = StubStrategy().delete(index.entity(qualname), index, root)
    assert isinstance(d, Deletion), d
    after = d.files_after[FILE]
    assert body not in after and _live(after, *path) == []
    assert "@overload\ndef load(x: int) -> int: ...\n@overload\ndef load(x: str) -> str: ...\n" in after
    assert "    @te.overload\n    def get(self, k: str) -> str: ...\n" in after
    assert body in d.gold_diff  # the gold patch gives the implementation back, not a declaration's ``...``
    _roundtrip(root, d, tmp_path)


def test_a_stub_stubs_every_branch_and_leaves_a_property_setter_alone(repo, tmp_path: Path) -> None:
    root, index = repo
    d = StubStrategy().delete(index.entity("pkg.core.compat"), index, root)
    assert isinstance(d, Deletion), d
    assert "key=_by_text" not in d.files_after[FILE] and "key=repr" not in d.files_after[FILE]
    _roundtrip(root, d, tmp_path)
    prop = StubStrategy().delete(index.entity("pkg.core.Box.size"), index, root)
    assert isinstance(prop, Deletion), prop
    assert "return len(self.items) + 1" not in prop.files_after[FILE]
    assert "    @size.setter\n    def size(self, v: int) -> None:\n        self.items = [0] * v\n" in prop.files_after[FILE]


@pytest.mark.parametrize(("qualname", "name"), [
    ("pkg.core.load", "def load"), ("pkg.core.Box.get", "def get"), ("pkg.core.Box.size", "def size")])
def test_a_deletion_removes_every_definition_of_the_name(repo, tmp_path: Path, qualname: str, name: str) -> None:
    root, index = repo
    d = DeleteStrategy().delete(index.entity(qualname), index, root)
    assert isinstance(d, Deletion), d  # a property used to be refused: its setter "used" it from outside
    after = d.files_after[FILE]
    assert name not in after  # no overload left to describe the API and keep the name bound, no orphan setter
    compile(after, FILE, "exec")
    _roundtrip(root, d, tmp_path)


def test_deleting_the_overloads_drops_the_overload_import(repo) -> None:
    root, index = repo
    d = DeleteStrategy().delete(index.entity("pkg.core.load"), index, root)
    assert isinstance(d, Deletion), d
    assert "from typing import overload\n" not in d.files_after[FILE] and "import typing as t\n" in d.files_after[FILE]


# --- the audit ---------------------------------------------------------------------------------------
def _workspace(tmp_path: Path, text: str) -> Path:
    ws = tmp_path / "ws"
    patches.write_tree({"pkg/__init__.py": "", FILE: text}, ws)
    return ws


def test_the_audit_finds_an_implementation_the_stub_missed(tmp_path: Path) -> None:
    # what the unfixed pipeline produced: the first declaration "stubbed", the implementation intact
    missed = CORE.replace("def load(x: int) -> int: ...", "def load(x: int) -> int: raise NotImplementedError")
    ws = _workspace(tmp_path, missed)
    hits = list(live_definitions(ws, ["pkg.core.load"]))
    assert [(h.channel, h.path) for h in hits] == [("workspace", FILE)]
    assert f"{FILE}:{_line(CORE, 'def load(x):')}-{_line(CORE, LOAD_BODY)}" in hits[0].evidence
    patches.write_tree({"pkg/__init__.py": "", FILE: CORE}, tmp_path / "original")
    sources = entity_sources_in_tree(tmp_path / "original", ["pkg.core.load"])  # as `taskforge audit` reads them
    result = audit_task_workspace(ws, sources)
    assert not result.passed and result.hits[0].evidence == hits[0].evidence


def test_the_audit_passes_a_correct_stub_and_a_property_setter(repo, tmp_path: Path) -> None:
    root, index = repo
    for q in ("pkg.core.load", "pkg.core.Box.get", "pkg.core.Box.size", "pkg.core.compat"):
        d = StubStrategy().delete(index.entity(q), index, root)
        assert isinstance(d, Deletion), d
        ws = _workspace(tmp_path / q, d.files_after[FILE])
        # the declarations and the setter the stub keeps are no leak, by either rule (they are not fingerprinted:
        # left in the file, their lines would make it look like a copy of the deleted code)
        sources = entity_sources_in_tree(root, [q])
        assert "self.items = [0] * v" not in sources[q] and "def load(x: int)" not in sources[q]
        result = audit_task_workspace(ws, sources)
        assert result.passed, (q, result.hits)


THERMO = '''class Thermo:
    @property
    def level(self) -> float:
        return round(self._celsius * 1.8 + 32.0, 2)

    @level.setter
    def level(self, value: float) -> None:
        if not isinstance(value, (int, float)):
            raise TypeError(f"thermostat level must be a number, got {type(value).__name__}")
        if value < -459.67 or value > 10_000.0:
            raise ValueError(f"thermostat level {value} is outside the physical range")
        self._celsius = (value - 32.0) / 1.8
        self._history_of_levels.append((value, self._celsius))
        self._notify_all_listeners_about_change(previous=None, current=value)
'''


def test_a_setter_bigger_than_its_stubbed_getter_is_not_taken_for_a_copy(tmp_path: Path) -> None:
    # guards this fix's own choice: fingerprinting every def of the name would take the setter the stub keeps
    # for a copy of the deleted code (most of the "deleted" lines are still in the file): a false LEAK_FOUND
    root = tmp_path / "repo"
    patches.write_tree({"pkg/__init__.py": "", FILE: THERMO}, root)
    index = build_index(root, SPEC)
    d = StubStrategy().delete(index.entity("pkg.core.Thermo.level"), index, root)
    assert isinstance(d, Deletion), d
    sources = entity_sources_in_tree(root, ["pkg.core.Thermo.level"])
    assert "thermostat level" not in index.entity("pkg.core.Thermo.level").source_in(THERMO.splitlines(True))
    assert audit_task_workspace(_workspace(tmp_path, d.files_after[FILE]), sources).passed


def test_the_fingerprinted_source_of_an_overloaded_name_holds_its_implementation(repo) -> None:
    root, _index = repo
    source = entity_sources_in_tree(root, ["pkg.core.load", "pkg.core.Box.get"])
    assert LOAD_BODY in source["pkg.core.load"] and GET_BODY in source["pkg.core.Box.get"]


# --- a real package ----------------------------------------------------------------------------------
@pytest.mark.realrepo
def test_itsdangerous_overloaded_methods_leave_no_implementation_behind(tmp_path_factory, tmp_path: Path) -> None:
    from real_sdists import sdist_copy

    root = sdist_copy(tmp_path_factory, tmp_path / "itsdangerous", "pypi:itsdangerous==2.2.0")
    index = build_index(root, EnvSpec("itsdangerous", "3.11", ".", src_roots=("src",),
                                      package_dirs=("src/itsdangerous",)))
    index.observe_import_time(())  # as after a coverage run: no method of these runs at import
    for qualname, file, body in [
            ("itsdangerous.timed.TimestampSigner.unsign", "src/itsdangerous/timed.py",
             "raise BadTimeSignature(\"Malformed timestamp\", payload=value)"),
            ("itsdangerous.serializer.Serializer.__init__", "src/itsdangerous/serializer.py",
             "self.signer_kwargs: dict[str, t.Any] = signer_kwargs or {}")]:
        entity = index.entity(qualname)
        original = (root / file).read_text()
        assert entity.statements > 10 and body in "".join(original.splitlines(keepends=True)[
            entity.start_line - 1:entity.end_line])
        assert {o.role for o in entity.other_definitions} == {DefinitionRole.OVERLOAD}
        d = StubStrategy().delete(entity, index, root)
        assert isinstance(d, Deletion), d
        assert body not in d.files_after[file] and body in d.gold_diff
        ws = tmp_path / qualname
        patches.write_tree({**patches.read_tree(root, [file]), **d.files_after}, ws)
        assert list(live_definitions(ws, [qualname], ("src",))) == []
