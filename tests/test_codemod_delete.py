"""Golden before/after tests of the `delete` codemod, plus the deletion -> gold patch property."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generators.deletion import Deletion
from generators.static_index import StaticIndex, build_index
from generators.strategy_delete import DeleteStrategy
from generators.strategy_module import ModuleStrategy
from generators.strategy_stub import StubStrategy
from taskforge.core import patches
from taskforge.core.environment import EnvSpec
from taskforge.core.outcomes import Rejected, RejectReason

INIT = '''"""Package."""
from .core import score, other  # public API
from .core import Report

__all__ = [
    "score",
    "other",
    "Report",
]
'''
CORE = '''import re
import json


def _clip(x):
    return max(0, x)


def _norm(x):
    # normalise
    return _clip(x) / 2


def _shared(x):
    return x


def score(x):
    """Score a value."""
    return _norm(x) + _shared(x) + len(re.findall("a", "aa"))


def other(y):
    return _shared(y)  # keep me


DEFAULT = other(1)


class Report:
    def render(self):
        return json.dumps({"s": self._fmt(1)})

    def _fmt(self, v):
        return v

    def big_user(self):
        a = 1
        b = 2
        c = 3
        d = 4
        e = 5
        f = 6
        return self.render() + str(a + b + c + d + e + f)
'''
SPEC = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, StaticIndex]:
    root = tmp_path_factory.mktemp("repo")
    patches.write_tree({"pkg/__init__.py": INIT, "pkg/core.py": CORE,
                        "pkg/extra.py": "from pkg.core import other\n\n\ndef twice(y):\n    return 2 * other(y)\n"},
                       root)
    return root, build_index(root, SPEC)


def test_delete_with_transitive_private_helpers_all_and_reexport(repo) -> None:
    root, index = repo
    d = DeleteStrategy().delete(index.entity("pkg.core.score"), index, root)
    assert isinstance(d, Deletion), d
    assert d.deleted == ("pkg.core.score", "pkg.core._norm", "pkg.core._clip")
    assert d.helpers == ("pkg.core._norm", "pkg.core._clip") and d.dependents == ()
    assert d.files_after["pkg/__init__.py"] == INIT.replace("import score, other", "import other").replace(
        '    "score",\n', "")
    want_core = CORE.replace('''import re
import json


def _clip(x):
    return max(0, x)


def _norm(x):
    # normalise
    return _clip(x) / 2


def _shared''', '''import json


def _shared''').replace('''def score(x):
    """Score a value."""
    return _norm(x) + _shared(x) + len(re.findall("a", "aa"))


''', "")
    assert d.files_after["pkg/core.py"] == want_core
    assert d.statements_deleted == 3 and d.files_touched == 2
    assert d.lines_deleted == 17  # 15 in core.py, 2 in __init__.py


def test_unrelated_code_keeps_exact_bytes(repo) -> None:
    root, index = repo
    d = DeleteStrategy().delete(index.entity("pkg.core.Report.big_user"), index, root)
    assert isinstance(d, Deletion), d
    assert list(d.files_after) == ["pkg/core.py"]  # __init__.py untouched
    assert d.files_after["pkg/core.py"] == CORE[: CORE.index("\n    def big_user")]
    assert d.dependents == () and d.helpers == ()


def test_small_dependent_is_deleted_and_recorded(repo) -> None:
    root, index = repo
    d = DeleteStrategy().delete(index.entity("pkg.core._shared"), index, root)
    # _shared is used by score (deleted with it) and other (used at module level): rejected
    assert isinstance(d, Rejected) and d.reason is RejectReason.DEPENDENTS_REMAIN
    d = DeleteStrategy().delete(index.entity("pkg.core._clip"), index, root)
    assert isinstance(d, Deletion), d
    assert d.dependents == ("pkg.core._norm", "pkg.core.score")
    assert "score" not in d.files_after["pkg/__init__.py"]


def test_dependents_that_cannot_go_reject(repo) -> None:
    root, index = repo
    out = DeleteStrategy().delete(index.entity("pkg.core.other"), index, root)
    assert isinstance(out, Rejected) and out.reason is RejectReason.DEPENDENTS_REMAIN
    assert "module level" in out.detail and "pkg/core.py:27" in out.detail
    assert "stubbing its users instead" not in out.detail  # a module-level use: nothing to stub


def test_a_big_user_is_stubbed_into_a_bigger_task(repo) -> None:
    # big_user (7 statements, public) uses render: too big to delete, so it is stubbed, not a rejection
    root, index = repo
    d = DeleteStrategy().delete(index.entity("pkg.core.Report.render"), index, root)
    assert isinstance(d, Deletion), d
    assert d.stubbed == ("pkg.core.Report.big_user",) and d.dependents == ()
    assert d.deleted == ("pkg.core.Report.render", "pkg.core.Report._fmt", "pkg.core.Report.big_user")
    assert d.removed == ("pkg.core.Report.render", "pkg.core.Report._fmt")  # big_user keeps its name
    after = d.files_after["pkg/core.py"]
    assert "def render" not in after and "def _fmt" not in after and "import json" not in after
    assert "    def big_user(self):\n        raise NotImplementedError\n" in after
    compile(after, "core.py", "exec")
    assert patches.diff(d.files_after, d.files_before)  # the gold patch restores both


def test_delete_class_takes_its_methods_and_export(repo) -> None:
    root, index = repo
    d = DeleteStrategy().delete(index.entity("pkg.core.Report"), index, root)
    assert isinstance(d, Deletion), d
    assert "pkg.core.Report._fmt" in d.deleted
    assert "import json" not in d.files_after["pkg/core.py"]
    assert "Report" not in d.files_after["pkg/__init__.py"]
    compile(d.files_after["pkg/__init__.py"], "x", "exec")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_deletion_then_gold_patch_gives_back_original_bytes(repo, data,
                                                                    tmp_path_factory) -> None:
    root, index = repo
    entity = data.draw(st.sampled_from(list(index.entities)))
    strategy = data.draw(st.sampled_from([StubStrategy(), DeleteStrategy(), ModuleStrategy()]))
    d = strategy.delete(entity, index, root)
    if isinstance(d, Rejected):
        return
    work = tmp_path_factory.mktemp("work")
    patches.write_tree(patches.read_tree(root), work)
    patches.apply(d.setup_diff, work)
    for rel, text in d.files_after.items():
        if text is not None:
            compile(text, rel, "exec")
    patches.apply(d.gold_diff, work)
    assert {p: (work / p).read_bytes() for p in patches.read_tree(work)} == {
        p: (root / p).read_bytes() for p in patches.read_tree(root)}
