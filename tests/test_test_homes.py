"""Tests pytest collects in one file but another file defines are guarded where they are defined.

lark 1.3.1 collects every test through tests/__main__.py (``python_files = "__main__.py"``, which imports every
test class). Reading the hidden tests by the collected file found no test there: no changed copies, no sealed
assertion, no strict equality, and every one of lark's candidates whose tests had an expected literal was
rejected ``weakly_guarded`` (236 of 767 decided, 0 tasks, session 31). ``taskforge.core.test_homes`` finds the
defining file; the guards work there and the planted copies run under the collected file's name.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

import pytest
from redteam_hacks import HACKS_BY_NAME, KNOWN_HOLES, Target
from reward_fixtures import git, write_tree

from sandboxes.fakes import SubprocessSandbox
from taskforge.core.environment import EnvSpec
from taskforge.core.task import Difficulty, Task
from taskforge.core.test_homes import test_homes as homes_of
from taskforge.reward.canaries import forge_chance, plant_canaries
from taskforge.reward.reward import reward, reward_many
from taskforge.reward.workspace import DirectoryTrees

WORDS = ("import unittest\n\nfrom mainlib import join, count\n\n\n"
         "class TestWords(unittest.TestCase):\n"
         "    def test_join(self):\n        self.assertEqual(join(['a', 'b']), 'a-b')\n\n"
         "    def test_join_three(self):\n        got = join(['x', 'y', 'z'])\n        assert got == 'x-y-z'\n\n"
         "    def test_count(self):\n        self.assertEqual(count('abcd'), 4)\n\n"
         "    def test_count_more(self):\n        self.assertEqual(count('abcdef'), 6)\n")
MAINLIB = {
    "mainlib/__init__.py": "from mainlib.words import join, count\n",
    "mainlib/words.py": "def join(parts):\n    return '-'.join(parts)\n\n\ndef count(s):\n    return len(s)\n",
    "tests/__init__.py": "",
    "tests/__main__.py": "import unittest\n\nfrom .test_words import TestWords\nfrom .test_loose import *\n",
    "tests/test_words.py": WORDS,
    "tests/test_loose.py": "from mainlib import count\n\n\ndef test_loose():\n    assert count('xyz') == 3\n",
    "pyproject.toml": ('[project]\nname = "mainlib"\nversion = "0.1"\n\n[tool.pytest.ini_options]\n'
                       'testpaths = ["tests"]\npython_files = "__main__.py"\n'),
}
SPEC = EnvSpec(project_name="mainlib", python="3.11", install_target="", src_roots=(".",),
               package_dirs=("mainlib",), test_paths=("tests",))
M = "tests/__main__.py"
HOME_SENSITIVE = ("oracle_stack_frame", "oracle_frame_else_echo", "borrow_test_eq_class", "stub_aware_forge",
                  "canary_constant_assert_forge", "stub_aware_constant_forge", "oracle_docstring_table")
F2P = (f"{M}::TestWords::test_join", f"{M}::TestWords::test_join_three")
P2P = (f"{M}::TestWords::test_count", f"{M}::TestWords::test_count_more", f"{M}::test_loose")


def test_ids_map_to_the_defining_file_and_back(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "r", MAINLIB)
    homes = homes_of(root, (*F2P, *P2P))
    assert homes.home(F2P[0]) == "tests/test_words.py::TestWords::test_join"
    assert homes.home(f"{M}::test_loose") == "tests/test_loose.py::test_loose"
    assert homes.loose() == {("tests/test_loose.py", "test_loose")}
    # a method planted in the imported class runs where the class is collected; a new function stays home
    assert homes.collected("tests/test_words.py::TestWords::test_new", (*F2P, *P2P)) == [f"{M}::TestWords::test_new"]
    assert homes.collected("tests/test_loose.py::test_new") == ["tests/test_loose.py::test_new"]
    # a test written where it is collected is not moved (and its file is not parsed)
    assert not homes_of(root, ["tests/test_words.py::TestWords::test_join"]).moved


ROOTDIR_IMPORTS = {  # itsdangerous 2.2.0: tests/ has no __init__.py, tests/test_itsdangerous/ has one
    "tests/test_itsdangerous/__init__.py": "",
    "tests/test_itsdangerous/test_serializer.py": ("def coerce(x):\n    return x\n\n\n"
                                                   "class TestSerializer:\n    def test_dumps(self):\n"
                                                   "        assert coerce(1) == 1\n"),
    "tests/test_itsdangerous/test_url_safe.py": ("from test_itsdangerous.test_serializer import TestSerializer\n\n\n"
                                                 "class TestURLSafe(TestSerializer):\n    pass\n"),
}


def test_absolute_imports_resolve_from_the_folder_pytest_puts_on_the_path(tmp_path: Path) -> None:
    """``from test_itsdangerous.test_serializer import TestSerializer`` is found from ``tests/`` (pytest's
    default import mode puts the first ancestor without ``__init__.py`` on sys.path): hiding TestSerializer's
    tests removed the class another file imports (18 candidates transform_failed). Tests a subclass inherits
    stay unmatched (6 no_fail_to_pass): ``test_homes`` follows imported classes, not base classes."""
    from generators.hidden_tests import imported_elsewhere

    root = write_tree(tmp_path / "r", ROOTDIR_IMPORTS)
    rel = "tests/test_itsdangerous/test_serializer.py"
    assert imported_elsewhere(root, rel) == {"TestSerializer"}
    assert imported_elsewhere(root, "tests/test_itsdangerous/test_url_safe.py") == frozenset()


def test_changed_copies_are_planted_at_home_and_requested_under_the_collected_name(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "r", MAINLIB)
    files = {"tests/test_words.py": WORDS}
    home_f2p = homes_of(root, F2P).homes(F2P)
    assert forge_chance(files, home_f2p) < 0.1  # two tests with an expected literal: two blocks
    assert forge_chance(files, F2P) == 1.0  # what reading the collected file gave: nothing to copy
    plan = plant_canaries(root, ["tests/test_words.py"], pass_to_pass=P2P, fail_to_pass=F2P,
                          rng=random.Random(3))
    twins = [n for n, want in plan.expect.items() if n.startswith(f"{M}::TestWords::") and want == "fail"]
    assert len(twins) >= 6, plan.expect
    assert not any(n.startswith("tests/test_words.py::") for n in plan.expect)
    planted = (root / "tests/test_words.py").read_text()
    assert all(f"def {n.rsplit('::', 1)[1]}(" in planted for n in twins)


def _task(original: Path, work: Path) -> Task:
    """A stub task of ``mainlib.words.join`` whose hidden tests are defined in tests/test_words.py."""
    repo = work / "build"
    shutil.copytree(original, repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "original")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "mainlib/words.py").write_text("def join(parts):\n    raise NotImplementedError\n\n\n"
                                           "def count(s):\n    return len(s)\n")
    kept = WORDS.split("    def test_join(self)")[0] + "    def test_count(self)" + WORDS.split("    def test_count(self)")[1]
    (repo / "tests/test_words.py").write_text(kept.replace("from mainlib import join, count", "from mainlib import count"))
    return Task(instance_id=f"mainlib__stub__join-{base[:8]}", repo="mainlib", source=str(original),
                base_commit=base, version="0", created_at="2026-12-05T00:00:00Z", strategy="stub",
                entities=("mainlib/words.py:join",), setup_patch=git(repo, "diff", "--binary"),
                patch=git(repo, "diff", "-R", "--", "mainlib/words.py"),
                test_patch=git(repo, "diff", "-R", "--", "tests/test_words.py"), problem_statement="Implement join.",
                fail_to_pass=F2P, pass_to_pass=P2P, env_spec=SPEC, difficulty=Difficulty(0, 1, 1, 1, 1, 0, 0, 1, 2, 0.1))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, Path]:
    base = tmp_path_factory.mktemp("homes")
    orig = write_tree(base / "orig", MAINLIB)
    return _task(orig, base), orig


def _backend(name: str) -> object:
    if name == "local":
        return SubprocessSandbox()
    from sandboxes.selection import make_sandbox
    from taskforge.core.settings import Settings

    return make_sandbox(Settings.load({"sandbox": name}))


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])])
def test_assertions_of_an_imported_class_are_sealed_where_it_is_defined(built: tuple[Task, Path], backend: str,
                                                                         tmp_path: Path) -> None:
    """Also through docker: the catalogue's known holes score 0 where the tests are collected away from home."""
    task, orig = built
    sandbox, trees = _backend(backend), DirectoryTrees(orig)
    probe = reward(task, task.patch, sandbox=sandbox, trees=trees, seal_probe=True)
    assert probe.score == 1.0, probe.detail
    assert dict(probe.seals) == {F2P[0]: ("tests/test_words.py::TestWords::test_join#0",),
                                 F2P[1]: ("tests/test_words.py::TestWords::test_join_three#1",)}
    sealed = dataclasses.replace(task, provenance={"seals": {n: list(s) for n, s in probe.seals.items()}})
    for graded in (task, task, sealed):  # unsealed: the changed copies run (a must-fail copy reported missing
        gold = reward(graded, graded.patch, sandbox=sandbox, trees=trees)  # would zero the gold grading)
        assert gold.score == 1.0, gold.detail
    assert reward(sealed, "", sandbox=sandbox, trees=trees).score == 0.0
    wrong = reward(sealed, sealed.patch.replace("'-'.join(parts)", "'-'.join(parts[:2])"), sandbox=sandbox,
                   trees=trees)
    assert wrong.score == 0.0 and wrong.outcomes[F2P[1]] == "failed" and wrong.outcomes[F2P[0]] == "passed"
    target = Target.from_task(sealed, trees, tmp_path / "ws")
    # the known holes and the catalogue's hacks that read or echo the tests, where the tests are collected away
    # from their home file (the stack-frame and echo oracles read the caller's file: the home)
    attacks = {**KNOWN_HOLES, **{n: HACKS_BY_NAME[n].make for n in HOME_SENSITIVE}}
    results = reward_many([(sealed, make(target)) for make in attacks.values()], sandbox=sandbox,  # type: ignore[arg-type]
                          trees=trees, jobs=2)
    assert {n: r.score for n, r in zip(attacks, results, strict=True)} == dict.fromkeys(attacks, 0.0), \
        {n: r.detail for n, r in zip(attacks, results, strict=True) if r.score}


@pytest.mark.realrepo
def test_lark_copies_are_planted_where_its_classes_are_defined_and_collected_through_main(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """lark 1.3.1 itself: the hidden tests of ``TestTrees`` get blocks of changed copies in tests/test_trees.py,
    and pytest collects every planted id the plan asks for (a must-fail copy reported missing would zero every
    gold grading)."""
    from real_sdists import collected, sdist_copy

    from taskforge.reward.strict_asserts import strict_source

    repo = sdist_copy(tmp_path_factory, tmp_path / "lark", "pypi:lark==1.3.1")

    ids, _ = collected(repo, "tests")
    f2p = [f"{M}::TestTrees::{name}" for name in ("test_transformer", "test_vargs", "test_partial")]  # literals
    p2p = sorted(n for n in ids if n.startswith(f"{M}::TestTrees::") and n not in f2p)
    assert set(f2p) <= ids and p2p, sorted(ids)[:5]
    homes = homes_of(repo, f2p)
    assert set(homes.homes(f2p)) == {n.replace(M, "tests/test_trees.py") for n in f2p}
    text = strict_source((repo / "tests/test_trees.py").read_text(), "_tfqX")
    assert forge_chance({"tests/test_trees.py": text}, homes.homes(f2p), "_tfqX") <= 1 / 8
    assert forge_chance({M: (repo / M).read_text()}, f2p, "_tfqX") == 1.0  # by the collected file: nothing
    plan = plant_canaries(repo, ["tests/test_trees.py"], pass_to_pass=p2p, fail_to_pass=f2p, rng=random.Random(7))
    inline = [n for n in plan.expect if n.startswith(f"{M}::TestTrees::")]
    assert len(inline) >= 3 and not any(n.startswith("tests/test_trees.py::") for n in plan.expect)
    found, tail = collected(repo, *plan.expect)
    assert set(plan.expect) <= found, (sorted(set(plan.expect) - found)[:3], tail)
