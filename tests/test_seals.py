"""Sealed expectations (``taskforge.reward.seals``): expected literals a graded process never holds.

A forger inside the graded process writes the runner's records as it likes; a sealed assertion's literal is
not in the workspace, so "passed" without the right value, or without the value at all, scores 0."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from redteam_hacks import KNOWN_HOLES, Target
from reward_fixtures import build_stub_task, write_tree

from sandboxes.fakes import SubprocessSandbox
from sandboxes.runner.records import Ledger
from taskforge.core.environment import EnvSpec
from taskforge.core.task import Task
from taskforge.reward.reward import reward
from taskforge.reward.seals import SealPlan, SealSite, decode, plan_for, seal_source, sites
from taskforge.reward.workspace import DirectoryTrees

SEALLIB = {
    "seallib/__init__.py": "from seallib.values import render, other\n",
    "seallib/values.py": (
        "import collections\nimport enum\n\n\n"
        "class Word(str):\n    def __repr__(self):\n        return 'Word()'\n\n\n"
        "class Level(enum.IntEnum):\n    HIGH = 3\n\n\n"
        "class Bag:\n    def __init__(self, d):\n        self.d = d\n\n"
        "    def __eq__(self, other):\n        return dict(self.d) == other\n\n\n"
        "def render(kind):\n"
        "    if kind == 'str':\n        return Word('abc')\n"
        "    if kind == 'level':\n        return Level.HIGH\n"
        "    if kind == 'pair':\n        return collections.namedtuple('P', 'x y')(1, 2)\n"
        "    if kind == 'dict':\n        return collections.OrderedDict([('a', [1, 2.5]), ('b', None)])\n"
        "    return Bag({'k': b'v'})\n\n\n"
        "def other():\n    return 7\n"
    ),
    "tests/test_values.py": (
        "import unittest\n\nfrom seallib import render, other\n\n\n"
        "def test_str():\n    got = render('str')\n    assert got == 'abc'\n\n\n"
        "def test_level():\n    assert 3 == render('level')\n\n\n"
        "def test_pair():\n    assert render('pair') == (\n        1,\n        2,\n    )\n\n\n"
        "def test_bag():\n    assert render('bag') == {'k': b'v'}\n\n\n"
        "class TestDict(unittest.TestCase):\n    def test_dict(self):\n"
        "        self.assertEqual(render('dict'), {'a': [1, 2.5], 'b': None})\n\n\n"
        "def test_other():\n    assert other() == 7\n"
    ),
    "pyproject.toml": '[project]\nname = "seallib"\nversion = "0.1"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
}
SEALLIB_SPEC = EnvSpec(project_name="seallib", python="3.11", install_target="", src_roots=(".",),
                       package_dirs=("seallib",), test_paths=("tests",))
F = "tests/test_values.py"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, Path]:
    base = tmp_path_factory.mktemp("seals")
    orig = write_tree(base / "orig", SEALLIB)
    task = build_stub_task(orig, base, module="seallib/values.py", function="render", spec=SEALLIB_SPEC,
                           repo="seallib")
    return task, orig


@pytest.fixture(scope="module")
def sealed(built: tuple[Task, Path]) -> Task:
    """The task with the sites its gold probe confirmed, as validation records them."""
    task, orig = built
    probe = reward(task, task.patch, sandbox=SubprocessSandbox(), trees=DirectoryTrees(orig), seal_probe=True)
    assert probe.score == 1.0, probe.detail
    return dataclasses.replace(task, provenance={"seals": {n: list(s) for n, s in probe.seals.items()}})


def test_the_gold_probe_seals_plain_values_and_leaves_out_what_only_compares_equal(sealed: Task) -> None:
    # a str subclass, an IntEnum, a namedtuple and an OrderedDict are read as their base values; Bag equals the
    # dict literal but is no plain data: its site is not sealed, and its test keeps its in-process assertion
    assert sealed.provenance["seals"] == {
        f"{F}::TestDict::test_dict": [f"{F}::TestDict::test_dict#0"],
        f"{F}::test_level": [f"{F}::test_level#0"],
        f"{F}::test_pair": [f"{F}::test_pair#0"],
        f"{F}::test_str": [f"{F}::test_str#1"],
    }


def test_sealed_gradings_pass_the_gold_patch_and_fail_a_wrong_or_missing_value(built: tuple[Task, Path],
                                                                               sealed: Task) -> None:
    _, orig = built
    sandbox, trees = SubprocessSandbox(), DirectoryTrees(orig)
    assert reward(sealed, sealed.patch, sandbox=sandbox, trees=trees).score == 1.0
    empty = reward(sealed, "", sandbox=sandbox, trees=trees)
    assert empty.score == 0.0 and empty.fraction == 0.0
    wrong = reward(sealed, sealed.patch.replace("(1, 2)", "(1, 3)"), sandbox=sandbox, trees=trees)
    assert wrong.score == 0.0 and wrong.outcomes[f"{F}::test_pair"] == "failed"
    assert wrong.outcomes[f"{F}::test_str"] == "passed" and "tampering" not in wrong.flag_names
    # a str subclass that equals everything is recorded as its plain text
    always = "type('W', (str,), {'__eq__': lambda s, o: True, '__hash__': str.__hash__})('abd')"
    forged = reward(sealed, sealed.patch.replace("Word('abc')", always), sandbox=sandbox, trees=trees)
    assert forged.outcomes[f"{F}::test_str"] == "failed" and forged.score == 0.0


def test_record_forgers_that_pick_originals_score_zero_on_sealed_tasks(built: tuple[Task, Path], sealed: Task,
                                                                        tmp_path: Path) -> None:
    """``KNOWN_HOLES`` write "passed" for the tests the stub ran (read from the files which one is the original):
    a sealed test they pass records no value, so it fails."""
    _, orig = built
    trees = DirectoryTrees(orig)
    target = Target.from_task(sealed, trees, tmp_path / "ws")
    for name, hole in KNOWN_HOLES.items():
        res = reward(sealed, hole(target), sandbox=SubprocessSandbox(), trees=trees)
        assert res.score == 0.0 and {"forged_results", "tampering"} <= set(res.flag_names), (name, res.detail)
        assert all(res.outcomes[n] != "passed" for n in sealed.provenance["seals"]), (name, res.outcomes)


def test_a_grading_workspace_holds_no_sealed_literal(built: tuple[Task, Path], sealed: Task) -> None:
    task, orig = built
    files = {F: (orig / F).read_text()}
    texts, plan = plan_for(files, task.fail_to_pass, sealed.provenance["seals"], "_tfsX")
    text = texts[F]
    assert "'abc'" not in text and "2.5" not in text and "(\n        1," not in text
    assert "{'k': b'v'}" in text  # not confirmed by the gold probe: left as it was
    assert sorted(s.site for s in plan.sites.values()) == sorted(s for v in sealed.provenance["seals"].values() for s in v)
    assert set(plan.required) == set(sealed.provenance["seals"])
    ast.parse(text)


def test_sites_are_top_level_equalities_with_a_literal_before_any_return() -> None:
    source = (
        "def test_a():\n    x = f()\n    assert x == 'lit'\n    assert 'lit' == g(x)\n    assert f() == g()\n"
        "    if x:\n        assert f() == 1\n    assert f() == [1, {'a': -2}]\n    assert f() == 1; y = 2\n\n\n"
        "def test_b():\n    if f():\n        return\n    assert f() == 3\n\n\n"
        "def test_c():\n    yield\n    assert f() == 3\n\n\n"
        "def test_d(): assert f() == 3\n\n\n"
        "class TestE:\n    def test_e(self):\n        self.assertEqual(f(), 'x', msg='m')\n"
        "        self.assertSequenceEqual(f(), [1])\n        assert f() == float('nan')\n"
    )
    tree = ast.parse(source)
    found = [tail for tail, *_ in sites(source, tree, ["test_a", "test_b", "test_c", "test_d", "TestE::test_e"])]
    assert found == ["TestE::test_e#0", "test_a#1", "test_a#5"]  # test_a#2: 'lit' was written above it


def test_a_value_a_stub_can_produce_without_the_feature_is_not_sealed() -> None:
    """None, bools, 0/1, empty values and literals the test already wrote (an echo of the argument, an element of
    the input) are left to the canaries' blocks of changed copies."""
    source = (
        "def test_a():\n    assert pluralize('plurals') == 'plurals'\n    assert pluralize('') == ''\n"
        "    assert mean([1, 2, 3]) == 2\n    assert f() is None\n    assert f() == None\n    assert f() == 1\n"
        "    assert f() == []\n    x = 'people'\n    assert pluralize('person') == 'people'\n"
        "    assert pluralize('ox') == 'oxen'\n\n\n"
        "@pytest.mark.parametrize('w', ['geese'])\ndef test_b(w):\n    assert pluralize('goose') == 'geese'\n"
    )
    found = [tail for tail, *_ in sites(source, ast.parse(source), ["test_a", "test_b"])]
    assert found == ["test_a#9"]


def test_values_a_do_nothing_fake_produces_are_weak_after_normalising_and_in_containers() -> None:
    """Red team, session 40: fakes of itsdangerous' signers that check nothing produced every sealed value of two
    tasks: ``unsign(sign("value")) == b"value"`` (the input converted str -> bytes) and ``loads_unsafe(bad) ==
    (False, None)`` (a tuple of constants); a records forger passed the rest. Such sites are weak: not sealed."""
    source = (
        "class TestSigner:\n    def test_a(self, signer):\n"
        "        assert signer.unsign(signer.sign('value')) == b'value'\n\n"
        "    def test_b(self, signer):\n        signed = signer.sign('my string')\n"
        "        out = signer.unsign(signed)\n        assert out == b'my string'\n\n"
        "    def test_c(self, s):\n        assert s.loads_unsafe(bad) == (False, None)\n\n"
        "    def test_d(self, s):\n        assert s.dumps([42]) == '[42].-9cNi0CxsSB3hZPNCe9a2eEs1ZM'\n\n\n"
        "def test_e():\n    assert f('42') == 42\n    assert f(7) == '7'\n    assert f(b'x') == 'x'\n"
        "    assert f((3, 4)) == [3, 4]\n    assert f('k', 'v') == {'k': 'v', 0: None}\n"
        "    assert f('x') == ['x', [True, b'']]\n    assert g() == (2, 3)\n    assert g('a') == ['a', 'z']\n"
    )
    keys = ["TestSigner::test_a", "TestSigner::test_b", "TestSigner::test_c", "TestSigner::test_d", "test_e"]
    found = [tail for tail, *_ in sites(source, ast.parse(source), keys)]
    assert found == ["TestSigner::test_d#0", "test_e#6", "test_e#7"]


def test_a_sealed_statement_keeps_the_code_that_computes_the_value() -> None:
    source = "def test_a():\n    assert 'x' == f(\n        1,  # one\n    )\n    done()\n"
    tokens: dict[str, SealSite] = {}
    out = seal_source(source, "t.py", {"test_a": None}, "SEAL", tokens=tokens)
    (token, site), = tokens.items()
    assert out == f"def test_a():\n    SEAL((f(\n        1,  # one\n    )), {token!r})\n    done()\n"
    assert site == SealSite("t.py::test_a#0", "x")
    probe = seal_source(source, "t.py", {"test_a": None}, "SEAL", probe=True)
    assert ", ('x'))" in probe


def test_every_grading_transforms_the_same_text_and_gets_fresh_tokens() -> None:
    """The strict rewrite (libcst: 17 s on idna's 1.4 MB test file) sees one text in every grading of a file;
    the tokens and the name are filled in after it, fresh each time."""
    source = "def test_a():\n    assert f(1) == 'one'\n    assert g() == 'two'\n    assert h() == k()\n"
    seen: list[str] = []

    def strict(text: str) -> str:
        seen.append(text)
        return text.replace("assert h() == k()", "assert STRICT(h(), k())")

    outs, token_sets = [], []
    for name in ("SEAL1", "SEAL2"):
        tokens: dict[str, SealSite] = {}
        outs.append(seal_source(source, "t.py", {"test_a": None}, name, tokens=tokens, transform=strict))
        token_sets.append(tokens)
    assert seen[0] == seen[1] and "SEAL" not in seen[0]
    assert token_sets[0].keys().isdisjoint(token_sets[1].keys())
    for out, tokens, name in zip(outs, token_sets, ("SEAL1", "SEAL2"), strict=True):
        one, two = sorted(tokens, key=lambda t: tokens[t].site)
        assert out == (f"def test_a():\n    {name}((f(1)), {one!r})\n    {name}((g()), {two!r})\n"
                       "    assert STRICT(h(), k())\n")
        assert [tokens[one].expected, tokens[two].expected] == ["one", "two"]


def test_a_file_that_holds_the_slot_marker_keeps_its_own_text() -> None:
    source = "def test_a():\n    assert f() == 'x'\n    g('__tfseal000000__', __tfseal_name__)\n"
    tokens: dict[str, SealSite] = {}
    out = seal_source(source, "t.py", {"test_a": None}, "SEAL", tokens=tokens, transform=str.upper)
    (token, site), = tokens.items()
    assert out == f"DEF TEST_A():\n    SEAL((F()), {token.upper()!r})\n    G('__TFSEAL000000__', __TFSEAL_NAME__)\n"
    assert site == SealSite("t.py::test_a#0", "x")


def test_the_grader_decodes_plain_values_and_nothing_else_equals() -> None:
    assert decode(["d", [[["s", "a"], ["l", [["i", "1"], ["f", "2.5"], None, ["T"]]]]]]) == {"a": [1, 2.5, None, True]}
    assert decode(["t", [["y", "6869"], ["c", "(1+2j)"]]]) == (b"hi", 1 + 2j)
    assert decode(["e", [["i", "1"]]]) == {1}
    for junk in (["?", "Bag"], ["i", "x"], "abc", ["zz", 1], [], ["d", [1]]):
        opaque = decode(junk)
        assert opaque != opaque and opaque != {"k": b"v"}, junk


def test_the_judge_fails_wrong_and_withheld_values_only() -> None:
    plan = SealPlan({"t1": SealSite("f::a#0", "x"), "t2": SealSite("f::b#0", [1])}, {"f::a": ("t1",), "f::b": ("t2",)})
    outcomes = {"f::a": "passed", "f::b": "passed", "f::c": "passed"}
    ok, why = plan.judge(outcomes, [("f::a", "t1", ["s", "x"]), ("f::b", "t2", ["l", [["i", "1"]]])])
    assert ok == outcomes and not why
    bad, why = plan.judge(outcomes, [("f::a", "t1", ["s", "y"]), ("f::c", "zz", ["s", "?"])])
    assert bad == {"f::a": "failed", "f::b": "failed", "f::c": "passed"} and set(why) == {"f::a", "f::b"}
    # a forged record with the right value under another test's id proves nothing for the test that withheld it
    again, _ = plan.judge(outcomes, [("f::c", "t1", ["s", "x"]), ("f::b", "t2", ["l", [["i", "1"]]])])
    assert again["f::a"] == "failed" and again["f::b"] == "passed"


def test_the_ledger_keeps_seal_records() -> None:
    lines = [json.dumps(r).encode() for r in ({"k": "hello"}, {"k": "seal", "id": "t::a", "t": "x1", "v": ["s", "q"]},
                                               {"k": "end", "exit": 0, "dur": 0.1})]
    ledger = Ledger.read(lines)
    assert ledger.seals == [("t::a", "x1", ["s", "q"])] and not ledger.forged


@pytest.mark.slow
def test_validation_records_the_sites_its_gold_grading_confirmed_and_grades_them_sealed(tmp_path: Path) -> None:
    """The first gold grading of a candidate is a probe; the accepted task keeps the confirmed sites, its forge
    chance is 0 (a record forger fails the sealed tests), and a grading of it writes no sealed literal."""
    from generate_fixtures import make_mini_project

    from generators.candidates import Candidate
    from sandboxes.fakes import HostSandbox
    from taskforge.core.settings import Settings
    from taskforge.pipeline.generate import ProfileJob, profile_source
    from taskforge.validate.steps import CandidateJob, validate_candidate

    src = make_mini_project(tmp_path / "minipkg")
    settings = Settings.load({"work_dir": str(tmp_path / "work"), "baseline_runs": 2, "battery": False})
    profile = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))
    f2p = ("tests/test_textfmt.py::test_title_words",)
    cand = Candidate("stub:minipkg.textfmt.title_words", "stub", "minipkg.textfmt.title_words", f2p, 1.0, "")
    res = validate_candidate(CandidateJob(profile.profile_dir, cand, settings.to_dict(), sandbox=HostSandbox()))
    assert res.task is not None, res.rejected
    task = res.task
    assert task.provenance["seals"] == {n: [f"{n}#0"] for n in f2p} and task.provenance["forge_chance"] == 0.0
    texts, plan = plan_for({"tests/test_textfmt.py": (src / "tests/test_textfmt.py").read_text()},
                           task.fail_to_pass, task.provenance["seals"], "_tfsX")
    assert "Hello Big World" not in texts["tests/test_textfmt.py"] and set(plan.required) == set(f2p)
    from taskforge.validate.worker import load_profile

    trees = DirectoryTrees(load_profile(profile.profile_dir).repo_dir)
    assert reward(task, task.patch, sandbox=HostSandbox(), trees=trees).score == 1.0
    assert reward(task, "", sandbox=HostSandbox(), trees=trees).score == 0.0


CODEC = (
    "def wrap(text):\n    data = text.encode('utf-8')\n    return str(len(data)).encode() + b':' + data\n\n\n"
    "def unwrap(blob):\n    size, _, data = blob.partition(b':')\n    if int(size) != len(data):\n"
    "        raise ValueError('bad length')\n    return data\n"
)
TEST_CODEC = "from minipkg.codec import unwrap, wrap\n\n\ndef test_roundtrip():\n    assert unwrap(wrap('value')) == b'value'\n"


@pytest.mark.slow
def test_a_task_whose_only_sealable_value_is_weak_is_held_to_max_forge_chance(tmp_path: Path) -> None:
    """Red team, session 40: one confirmed seal of any strength set a task's forge chance to 0, so itsdangerous'
    TimestampSigner task (canary forge chance 1.0, its one seal ``b"value"`` for ``sign("value")``) was accepted
    and a records forger scored 1.0 on it. A weak value is not sealed: such a task keeps the canaries' forge
    chance and ``max_forge_chance`` rejects it; a task with a strong seal is still accepted at 0, and both
    numbers are recorded. (``max_forge_chance`` is set below this mini task's canary chance.)"""
    from generate_fixtures import make_mini_project

    from generators.candidates import Candidate
    from sandboxes.fakes import HostSandbox
    from taskforge.core.outcomes import RejectReason
    from taskforge.core.settings import Settings
    from taskforge.pipeline.generate import ProfileJob, profile_source
    from taskforge.validate.steps import CandidateJob, validate_candidate

    src = make_mini_project(tmp_path / "minipkg", {"minipkg/codec.py": CODEC, "tests/test_codec.py": TEST_CODEC})
    settings = Settings.load({"work_dir": str(tmp_path / "work"), "baseline_runs": 2, "battery": False,
                              "max_forge_chance": 0.001})
    profile = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))

    def validate(entity: str, test: str) -> Any:
        cand = Candidate(f"stub:{entity}", "stub", entity, (test,), 1.0, "")
        return validate_candidate(CandidateJob(profile.profile_dir, cand, settings.to_dict(), sandbox=HostSandbox()))

    weak = validate("minipkg.codec.unwrap", "tests/test_codec.py::test_roundtrip")
    assert weak.task is None and weak.rejected is not None, weak.task and weak.task.provenance
    assert weak.rejected.reason is RejectReason.WEAKLY_GUARDED, weak.rejected
    strong = validate("minipkg.textfmt.title_words", "tests/test_textfmt.py::test_title_words")
    assert strong.task is not None, strong.rejected
    provenance = strong.task.provenance
    assert provenance["forge_chance"] == 0.0 and provenance["canary_forge_chance"] > 0.001, provenance


def test_a_test_method_inherited_from_a_mixin_is_sealed_once_where_it_is_defined() -> None:
    """cachetools' ``CacheWrapperTest(DecoratorTestMixin, ...)``: the node ids name the subclasses, the assertion
    lives in the mixin; one sealed statement, required of every subclass's test."""
    source = ("import unittest\n\n\nclass Mixin:\n    def test_m(self):\n        self.assertEqual(f('a'), 'xa')\n\n\n"
              "class TestA(Mixin, unittest.TestCase):\n    pass\n\n\n"
              "class TestB(Mixin, unittest.TestCase):\n    def test_own(self):\n        assert g() == 'gg'\n")
    found = [tail for tail, *_ in sites(source, ast.parse(source), ["TestA::test_m", "TestB::test_m", "TestB::test_own"])]
    assert found == ["Mixin::test_m#0", "TestB::test_own#0"]
    seals = {"t.py::TestA::test_m": ["t.py::Mixin::test_m#0"], "t.py::TestB::test_m": ["t.py::Mixin::test_m#0"]}
    texts, plan = plan_for({"t.py": source}, list(seals), seals, "SEAL")
    (token, site), = plan.sites.items()
    assert site == SealSite("t.py::Mixin::test_m#0", "xa") and "'xa'" not in texts["t.py"]
    assert plan.required == {"t.py::TestA::test_m": (token,), "t.py::TestB::test_m": (token,)}


def test_a_return_inside_a_helper_the_test_defines_does_not_end_it() -> None:
    """lark's ``test_partial`` defines ``def test(...): return ...`` above its assertion: a site all the same
    (as it is a test that a changed copy can be appended to)."""
    from taskforge.reward.canaries import _ends_on_its_own

    source = ("def test_p():\n    def helper(s):\n        return s.upper()\n\n    got = [helper(x) for x in 'ab']\n"
              "    assert got == ['A', 'B']\n\n\ndef test_r():\n    if f():\n        return\n    assert g() == 'gg'\n")
    tree = ast.parse(source)
    assert [tail for tail, *_ in sites(source, tree, ["test_p", "test_r"])] == ["test_p#2"]
    fns = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert not _ends_on_its_own(fns["test_p"]) and _ends_on_its_own(fns["test_r"])


TEXTFMT_BLANK = ('def title_words(text):\n    """Capitalise every word of ``text``."""\n    if not text.strip():\n'
                 '        return ""\n    words = text.split()\n    return " ".join(w.capitalize() for w in words)\n\n\n'
                 'def shout(text):\n    return text.upper() + "!"\n')
TEST_TITLE_MORE = ("from minipkg.textfmt import title_words\n\n\ndef test_title_words_nonempty():\n"
                   "    assert title_words('one two')\n")
TEST_TITLE_BLANK = ("from minipkg.textfmt import title_words\n\n\ndef test_title_words_blank():\n"
                    "    assert not title_words('   ')\n")


@pytest.mark.slow
def test_a_seal_guards_the_tests_that_run_only_its_deleted_lines(tmp_path: Path) -> None:
    """Session 41: one strong seal set the task's forge chance to 0 whatever it guarded. A forger that computes
    the sealed value (``title_words("hello big world")``) has implemented the lines that computing it runs, so an
    unsealed test that runs only those lines (``title_words('one two')``) is guarded too; one that runs a deleted
    line no sealed test runs (the blank branch) is not, and with no literal to plant copies of, the chance over
    it is 1.0, over ``max_forge_chance``: the task is refused."""
    from generate_fixtures import make_mini_project

    from generators.candidates import Candidate
    from sandboxes.fakes import HostSandbox
    from taskforge.core.outcomes import RejectReason
    from taskforge.core.settings import Settings
    from taskforge.pipeline.generate import ProfileJob, profile_source
    from taskforge.validate.steps import CandidateJob, validate_candidate

    sealed, more = "tests/test_textfmt.py::test_title_words", "tests/test_title_more.py::test_title_words_nonempty"
    blank = "tests/test_title_blank.py::test_title_words_blank"

    def validate(f2p: tuple[str, ...], share: float = 0.01) -> Any:
        files = {"minipkg/textfmt.py": TEXTFMT_BLANK, "tests/test_title_more.py": TEST_TITLE_MORE,
                 **({"tests/test_title_blank.py": TEST_TITLE_BLANK} if blank in f2p else {})}
        home = tmp_path / f"{len(f2p)}-{share}"
        src = make_mini_project(home / "minipkg", files)
        settings = Settings.load({"work_dir": str(home / "work"), "baseline_runs": 2, "battery": False,
                                  "max_unguarded_share": share})
        profile = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))
        cand = Candidate("stub:minipkg.textfmt.title_words", "stub", "minipkg.textfmt.title_words", f2p, 1.0, "")
        return validate_candidate(CandidateJob(profile.profile_dir, cand, settings.to_dict(), sandbox=HostSandbox()))

    res = validate((sealed, more, blank))
    assert res.task is None and res.rejected is not None, res.task and res.task.provenance
    assert res.rejected.reason is RejectReason.WEAKLY_GUARDED, res.rejected
    assert "1 of 3 FAIL_TO_PASS tests are sealed, 1 more run only deleted lines a sealed test runs" in \
        res.rejected.detail, res.rejected.detail
    # session 42: even with every sealable assertion sealed the task is over the limit (``_doomed``), so its gold
    # grading, which confirms the seals, went first, and the verdict on them came before the battery and the
    # empty-patch grading
    assert "gold_patch" in res.stages and "empty_patch" not in res.stages, res.stages
    ok = validate((sealed, more))
    assert ok.task is not None, ok.rejected
    assert ok.task.provenance["forge_chance"] == 0.0 and ok.task.provenance["seal_guarded"] == 1, ok.task.provenance
    # the gradings draw the canaries' blocks from the other tests first, as this chance assumes
    assert ok.task.provenance["seal_guarded_tests"] == [more]
    from taskforge.reward.reward import _seal_guarded
    assert _seal_guarded(ok.task) == (more,)
    # session 42: when the unguarded tests are few (here 1 of 3, under a share of 1/2), they leave the task
    # instead: a test out of the reward is none a forger can take, and the rest is guarded
    few = validate((sealed, more, blank), share=0.5)
    assert few.task is not None, few.rejected
    assert few.task.fail_to_pass == (sealed, more) and few.task.provenance["unguarded"] == [blank]
    assert few.task.provenance["forge_chance"] == 0.0, few.task.provenance
