"""Golden before/after tests of the `module` codemod."""

from __future__ import annotations

from pathlib import Path

import pytest

from generators.deletion import Deletion
from generators.static_index import StaticIndex, build_index
from generators.strategy_module import ModuleStrategy
from taskforge.core import patches
from taskforge.core.environment import EnvSpec
from taskforge.core.outcomes import Rejected, RejectReason

INIT = '''from . import fmt
from .fmt import shout
from .core import run

__all__ = ["shout", "run", "fmt"]
'''
FMT = '''def shout(s):
    return s.upper() + "!"
'''
CORE = '''import os
from pkg import fmt
import pkg.consts


def _loud(x):
    return fmt.shout(x)


def run(p):
    """Run."""
    return os.path.basename(p) + pkg.consts.SUFFIX
'''
CONSTS = 'SUFFIX = ".x"\n'
USER = '''from pkg.consts import SUFFIX


def tag(s):
    return s + SUFFIX
'''
SPEC = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, StaticIndex]:
    root = tmp_path_factory.mktemp("repo")
    patches.write_tree({"pkg/__init__.py": INIT, "pkg/fmt.py": FMT, "pkg/core.py": CORE,
                        "pkg/consts.py": CONSTS, "pkg/user.py": USER}, root)
    return root, build_index(root, SPEC)


def test_module_removed_with_imports_reexports_all_and_private_dependent(repo, tmp_path: Path) -> None:
    root, index = repo
    d = ModuleStrategy().delete(index.entity("pkg.fmt"), index, root)
    assert isinstance(d, Deletion), d
    assert d.files_after["pkg/fmt.py"] is None and d.files_before["pkg/fmt.py"] == FMT
    assert d.files_after["pkg/__init__.py"] == 'from .core import run\n\n__all__ = ["run"]\n'
    assert d.files_after["pkg/core.py"] == CORE.replace("from pkg import fmt\n", "").replace(
        '''def _loud(x):
    return fmt.shout(x)


''', "")
    assert d.dependents == ("pkg.core._loud",)
    assert set(d.deleted) >= {"pkg.fmt", "pkg.fmt.shout", "pkg.core._loud"}
    assert d.files_touched == 3 and "pkg/user.py" not in d.files_after
    work = tmp_path / "w"
    patches.write_tree(patches.read_tree(root), work)
    patches.apply(d.setup_diff, work)
    assert not (work / "pkg/fmt.py").exists()
    patches.apply(d.gold_diff, work)
    assert patches.read_tree(work) == patches.read_tree(root)


def test_module_whose_constant_is_still_used_is_rejected(repo) -> None:
    root, index = repo
    out = ModuleStrategy().delete(index.entity("pkg.consts"), index, root)
    assert isinstance(out, Rejected) and out.reason is RejectReason.DEPENDENTS_REMAIN
    assert "SUFFIX" in out.detail or "consts" in out.detail


def test_packages_are_not_removed(repo) -> None:
    root, index = repo
    assert not ModuleStrategy().applies_to(index.entity("pkg"))
    out = ModuleStrategy().delete(index.entity("pkg"), index, root)
    assert isinstance(out, Rejected) and out.reason is RejectReason.TRIVIAL_BODY
