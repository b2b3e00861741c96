"""Bigger delete/module tasks (users of the target stubbed, generators.dependent_stubs) and the index fixes
that make the deletions see every use: star re-exports (``from .mod import *``) and ``__main__.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from generators.deletion import Deletion
from generators.dependent_stubs import task_label
from generators.problem_statement import write_statement
from generators.static_index import StaticIndex, build_index
from generators.strategy_delete import DeleteStrategy
from generators.strategy_module import ModuleStrategy
from generators.strategy_stub import StubStrategy
from taskforge.core import patches
from taskforge.core.environment import EnvSpec
from taskforge.core.outcomes import Rejected, RejectReason

SPEC = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",), test_paths=("tests",))

BIG = "\n".join(f"    v{i} = {i}" for i in range(8))  # 8 statements: too big for the delete cascade

CORE = f'''def target(x):
    """The feature."""
    y = x + 1
    return y * 2


def user_one(x):
    """Uses the target."""
{BIG}
    return target(x) + v0


def user_two(x):
{BIG}
    return target(x) - v1


class Box:
    def unbox(self, x):
{BIG.replace("    v", "        v")}
        return target(x)


def lonely(x):
    a = x
    return a


def used_by_many(x):
    b = x * 3
    return b
'''
MANY = "".join(f'''

def many_{i}(x):
{BIG}
    return used_by_many(x)
''' for i in range(4))
AT_IMPORT = '''from pkg.core import lonely


class Holder:
    attr = lonely  # class body: nothing to stub


def runs_early(x):
    return lonely(x)


CONST = runs_early(1)
'''
MODLEVEL = '''def helper_mod(x):
    c = x
    return c


def big_caller(x):
''' + BIG + '''
    return helper_mod(x)


def __getitem__(x):
''' + BIG + '''
    return helper_mod(x)
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, StaticIndex]:
    root = tmp_path_factory.mktemp("bigger")
    patches.write_tree({
        "pkg/__init__.py": "from .core import *\nfrom .star_user import *\n",
        "pkg/core.py": CORE + MANY,
        "pkg/early.py": AT_IMPORT,
        "pkg/modlevel.py": MODLEVEL,
        "pkg/star_user.py": "import pkg\n\n\ndef wrap(x):\n    return x\n",
        "pkg/curried.py": "import pkg\n\nwrapped = pkg.wrap(pkg.user_two)\n",
        "pkg/__main__.py": "from .core import lonely\n\n\ndef main():\n    return lonely(1)\n\n\n"
                           "if __name__ == '__main__':\n    main()\n",
        "tests/test_core.py": "from pkg import *\n\n\ndef test_target():\n    assert target(1) == 4\n",
    }, root)
    return root, build_index(root, SPEC)


def _delete(repo: tuple[Path, StaticIndex], q: str) -> Deletion | Rejected:
    root, index = repo
    return DeleteStrategy().delete(index.entity(q), index, root)


def test_users_too_big_to_delete_are_stubbed(repo) -> None:
    d = _delete(repo, "pkg.core.target")
    assert isinstance(d, Deletion), d
    assert set(d.stubbed) == {"pkg.core.user_one", "pkg.core.user_two", "pkg.core.Box.unbox"}
    assert d.deleted[0] == "pkg.core.target" and d.removed == ("pkg.core.target",)
    after = d.files_after["pkg/core.py"]
    assert "def target" not in after and after.count("raise NotImplementedError") == 3
    assert 'def user_one(x):\n    """Uses the target."""\n    raise NotImplementedError\n' in after
    compile(after, "core.py", "exec")
    assert task_label(d) == "pkg.core.target+user_one+user_two+unbox"
    root, index = repo
    statement = write_statement(d, index, root, repo="pkg")
    assert "# Add `pkg.core.target`" in statement
    section = statement[statement.index("now raise `NotImplementedError`"):]
    for q in d.stubbed:
        assert f"`{q}`" in section
    assert Deletion.from_dict(d.to_dict()) == d


def test_more_users_than_the_limit_reject(repo) -> None:
    out = _delete(repo, "pkg.core.used_by_many")
    assert isinstance(out, Rejected) and out.reason is RejectReason.DEPENDENTS_REMAIN
    assert "more than 3 users would be stubbed" in out.detail


def test_class_body_module_level_import_time_and_dunder_users_reject(repo) -> None:
    out = _delete(repo, "pkg.core.lonely")  # Holder.attr = lonely, runs_early at import, __main__
    assert isinstance(out, Rejected) and out.reason is RejectReason.DEPENDENTS_REMAIN
    assert "stubbing its users instead" in out.detail
    assert any(w in out.detail for w in ("class body", "runs when the package is imported", "module level"))
    out = _delete(repo, "pkg.modlevel.helper_mod")  # big_caller can be stubbed, the dunder cannot
    assert isinstance(out, Rejected) and "a dunder is called implicitly" in out.detail


def test_the_module_strategy_stubs_users_in_other_files(repo) -> None:
    root, index = repo
    patches.write_tree({"pkg/extra.py": "def feature(x):\n    q = x\n    return q\n",
                        "pkg/consumer.py": "from pkg.extra import feature\n\n\ndef consume(x):\n" + BIG
                                           + "\n    return feature(x)\n"}, root)
    index = build_index(root, SPEC)
    d = ModuleStrategy().delete(index.entity("pkg.extra"), index, root)
    assert isinstance(d, Deletion), d
    assert d.stubbed == ("pkg.consumer.consume",) and d.files_after["pkg/extra.py"] is None
    assert "from pkg.extra" not in d.files_after["pkg/consumer.py"]
    assert "raise NotImplementedError" in d.files_after["pkg/consumer.py"]
    for rel in ("pkg/extra.py", "pkg/consumer.py"):
        (root / rel).unlink()


def test_star_reexports_resolve_attribute_and_bare_name_uses(repo) -> None:
    _root, index = repo
    refs = index.entity("pkg.core.user_two").references
    # ``pkg.user_two`` in curried.py: pkg star-imports core
    assert any(r.file == "pkg/curried.py" and r.line == 3 and not r.in_entity for r in refs)
    # deleting it must see that module-level use, not break ``import pkg.curried``
    out = _delete(repo, "pkg.core.user_two")
    assert isinstance(out, Rejected) and "module level (pkg/curried.py:3)" in out.detail
    # a test's ``from pkg import *`` then ``target(1)``
    assert any(r.is_test and r.file == "tests/test_core.py" and r.kind == "call"
               for r in index.entity("pkg.core.target").references)


def test_main_module_is_indexed_and_its_guarded_call_is_not_import_time(repo) -> None:
    root, index = repo
    assert index.module_for_file("pkg/__main__.py") is not None
    main_refs = index.entity("pkg.__main__.main").references
    assert main_refs and all(r.kind != "call" for r in main_refs)  # under the main guard
    assert "pkg.__main__.main" not in index.import_time_entities()
    assert isinstance(StubStrategy().delete(index.entity("pkg.__main__.main"), index, root), Deletion)
    # lonely is imported by __main__: the deletion sees that use
    assert any(r.file == "pkg/__main__.py" for r in index.entity("pkg.core.lonely").references)


def test_a_star_imported_name_shadows_the_submodule_of_the_same_name(tmp_path: Path) -> None:
    # python-slugify: ``from .slugify import *`` in the package makes ``slugify.slugify`` the function
    patches.write_tree({
        "pkg/__init__.py": "from .pkg import *\n",
        "pkg/pkg.py": "__all__ = ['pkg']\n\n\ndef pkg(x):\n    y = x\n    return y\n",
        "tests/test_p.py": "from functools import partial\nfrom pkg import pkg as public\n\n"
                           "bound = partial(public, 1)\n\n\ndef test_p():\n    assert bound() == 1\n",
    }, tmp_path)
    index = build_index(tmp_path, SPEC)
    refs = index.entity("pkg.pkg.pkg").references
    assert any(r.is_test and r.line == 4 and r.kind == "name" for r in refs)
    from generators.import_time import files_broken_by_removal

    assert files_broken_by_removal(index, tmp_path, ("pkg.pkg.pkg",)) == {"tests/test_p.py"}
