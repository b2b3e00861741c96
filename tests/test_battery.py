"""The cheating battery (``taskforge.validate.battery``): golden stand-in transforms, the stand-ins' own
behaviour, and the battery graded through the real reward on tiny real tasks."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from reward_fixtures import MINILIB, MINILIB_SPEC, broken_tree, build_stub_task, write_tree

from sandboxes.fakes import SubprocessSandbox
from taskforge.core.patches import apply, patch_paths, read_tree
from taskforge.core.settings import Settings
from taskforge.core.task import Task
from taskforge.reward.reward import EnvCache, reward
from taskforge.reward.workspace import DirectoryTrees
from taskforge.validate.battery import (
    STAND_INS,
    BatteryResult,
    file_targets,
    run_battery,
    stand_in_patch,
    stand_in_patches,
    stand_in_source,
    transform,
)


def body(name: str, indent: str = "    ", **kw: Any) -> str:
    return textwrap.indent(stand_in_source(name, **kw), indent)


# -- golden transforms -----------------------------------------------------------------------------------
HEAD = "import os  # keep me\n\nX = 1   # odd   spacing\n\n\n"
TAIL = "\n\ndef untouched(a,b):  # comment\n    return a+b  # no reformat\n\n\nY = [1,\n     2]\n"


def test_function_body_replaced_docstring_kept_rest_byte_for_byte() -> None:
    text = HEAD + 'def f(x):\n    """Doc."""\n    # old comment\n    return x + 1\n' + TAIL
    out, replaced = transform(text, frozenset({"f"}), "none")
    assert out == HEAD + 'def f(x):\n    """Doc."""\n    return None\n' + TAIL
    assert replaced == ["f"]


def test_no_target_is_a_no_op() -> None:
    text = HEAD + "def f(x):\n    return x\n" + TAIL
    assert transform(text, frozenset({"g", "C.f"}), "always_equal") == (text, [])


def test_method_echo_skips_self_other_methods_untouched() -> None:
    text = "class C:\n    k = 3\n\n    def m(self, a):\n        return a * 2\n\n    def n(self):\n        return 1\n"
    out, replaced = transform(text, frozenset({"C.m"}), "echo_first")
    assert out == ("class C:\n    k = 3\n\n    def m(self, a):\n        return a\n"
                   "\n    def n(self):\n        return 1\n")
    assert replaced == ["C.m"]


def test_class_target_replaces_every_method_nested_class_included_not_attributes() -> None:
    text = ("class C(Base):\n    attr = 'x'\n\n    @staticmethod\n    def s(a):\n        return a\n\n"
            "    class Inner:\n        def i(self):\n            return 2\n\n    def m(self):\n"
            "        def helper():\n            return 3\n        return helper()\n")
    out, replaced = transform(text, frozenset({"C"}), "echo_first")
    assert replaced == ["C.s", "C.Inner.i", "C.m"]
    assert "class C(Base):\n    attr = 'x'\n\n    @staticmethod\n    def s(a):\n        return a\n" in out
    assert "def i(self):\n            return None\n" in out  # nothing after self
    assert "helper" not in out  # the nested function was part of m's body


def test_decorated_function_keeps_decorators_and_signature() -> None:
    text = "@functools.lru_cache(maxsize=None)\n@other  # why\ndef f(a: int, *, b: str = 'x') -> int:\n    return a\n"
    out, _ = transform(text, frozenset({"f"}), "xfail")
    assert out == ("@functools.lru_cache(maxsize=None)\n@other  # why\ndef f(a: int, *, b: str = 'x') -> int:\n"
                   + body("xfail"))


def test_property_getter_and_setter_both_stood_in() -> None:
    text = ("class P:\n    @property\n    def v(self):\n        return self._v\n\n    @v.setter\n"
            "    def v(self, value):\n        self._v = value\n")
    out, replaced = transform(text, frozenset({"P"}), "none")
    assert out == ("class P:\n    @property\n    def v(self):\n        return None\n\n    @v.setter\n"
                   "    def v(self, value):\n        return None\n")
    assert replaced == ["P.v", "P.v"]


def test_generator_stays_a_generator_and_init_returns_none() -> None:
    text = ("def gen(n):\n    for i in range(n):\n        yield i\n\n\nasync def agen():\n    yield 1\n\n\n"
            "def outer():\n    def inner():\n        yield 1\n    return inner\n\n\n"
            "class K:\n    def __init__(self, a):\n        self.a = a\n")
    targets = frozenset({"gen", "agen", "outer", "K"})
    out, _ = transform(text, targets, "always_equal")
    assert "def gen(n):\n    return\n    yield\n" in out and "async def agen():\n    return\n    yield\n" in out
    assert "def outer():\n" + body("always_equal") in out  # a yield of a nested function does not count
    assert "def __init__(self, a):\n        return None\n" in out
    raising, _ = transform(text, targets, "skip")
    assert "def gen(n):\n" + body("skip") + "    yield\n" in raising
    assert "def __init__(self, a):\n" + body("skip", " " * 8) in raising
    ns: dict[str, Any] = {}
    exec(compile(out, "m.py", "exec"), ns)
    assert list(ns["gen"](3)) == [] and ns["K"](1).__dict__ == {}


def test_async_def_stays_async_one_line_bodies_get_a_block() -> None:
    import asyncio

    text = "async def fetch(url):\n    return await get(url)\n\n\ndef one(x): return x * 2\n"
    out, _ = transform(text, frozenset({"fetch", "one"}), "echo_first")
    assert out.startswith("async def fetch(url):\n    return url\n")
    assert "def one(x):\n    return x\n" in out
    ns: dict[str, Any] = {}
    exec(compile(out, "m.py", "exec"), ns)
    assert asyncio.run(ns["fetch"]("u")) == "u" and ns["one"](5) == 5


def test_module_target_stands_in_for_every_function_and_method_only() -> None:
    text = "'''Module doc.'''\nimport re\n\nPATTERN = re.compile('x')\n\n\ndef f():\n    return 1\n\n\n" \
           "class C:\n    N = 2\n\n    def m(self):\n        return 3\n"
    out, replaced = transform(text, frozenset({""}), "none")
    assert replaced == ["f", "C.m"]
    assert out == ("'''Module doc.'''\nimport re\n\nPATTERN = re.compile('x')\n\n\ndef f():\n    return None\n\n\n"
                   "class C:\n    N = 2\n\n    def m(self):\n        return None\n")


@pytest.mark.parametrize("name", list(STAND_INS))
def test_every_stand_in_compiles_in_every_construct(name: str) -> None:
    text = ("def f(a, /, b, *args, c=1, **kw):\n    return a\n\n\nclass C:\n    def __init__(self):\n        pass\n\n"
            "    @classmethod\n    def k(cls, x):\n        return x\n\n    def g(self):\n        yield 1\n\n\n"
            "async def h():\n    yield 2\n")
    out, replaced = transform(text, frozenset({""}), name)
    compile(out, "m.py", "exec")
    assert len(replaced) == 5


def test_file_targets_dotted_src_layout_colon_and_module_names() -> None:
    ents = ("pkg.mod.f", "pkg.mod.C.m", "pkg.other.g", "pkg.mod", "src/pkg/mod.py:h", "elsewhere.py:z")
    assert file_targets(ents, "src/pkg/mod.py") == frozenset({"f", "C.m", "", "h"})
    assert file_targets(ents, "pkg/other.py") == frozenset({"g"})
    assert file_targets(("pkg.f",), "pkg/__init__.py") == frozenset({"f"})
    assert file_targets(ents, "pkg/third.py") == frozenset()


# -- the stand-ins themselves -------------------------------------------------------------------------
def make(name: str, signature: str = "def square(x):", filename: str = "lib_under_test.py") -> Any:
    """The function of ``signature`` with stand-in ``name`` as its body (through the real transform)."""
    fn = signature.split()[1].split("(")[0]
    text, _ = transform(f"{signature}\n    raise NotImplementedError\n", frozenset({fn}), name)
    ns: dict[str, Any] = {}
    exec(compile(text, filename, "exec"), ns)
    return ns[fn]


def test_always_equal_is_equal_to_anything_and_absorbs_use() -> None:
    r = make("always_equal")(3)
    assert r == 9 and r == "nine" and 9 == r and r == [1] and not (r != 4) and r <= 1 and r >= 1
    assert bool(r) and hash(r) == 0 and len(r) == 0 and list(r) == [] and 5 in r
    assert r.upper().strip()[0] is r and r(1, k=2) is r and str(r) == "" and repr(r) == "" and f"{r}" == ""
    assert r + 1 is r and 1 + r is r and int(r) == 0
    with pytest.raises(AttributeError):
        r.__fspath__  # noqa: B018 - dunders are not faked: protocols must not think it is a path


def test_echo_first_skips_self_and_reads_star_args() -> None:
    assert make("echo_first", "def f(a, b):")(1, 2) == 1
    assert make("echo_first", "def f(a, /, b):")(3, 2) == 3
    assert make("echo_first", "def f(*args):")(4, 5) == 4 and make("echo_first", "def f(*args):")() is None
    assert make("echo_first", "def f():")() is None
    assert make("echo_first", "def f(*, k):")(k=1) is None
    text, _ = transform("class C:\n    def m(self, a, b=2):\n        pass\n\n    @classmethod\n"
                        "    def k(cls, x):\n        pass\n", frozenset({"C"}), "echo_first")
    ns: dict[str, Any] = {}
    exec(text, ns)
    assert ns["C"]().m(7) == 7 and ns["C"].k(8) == 8


def test_xfail_and_skip_raise_pytests_outcomes() -> None:
    with pytest.raises(pytest.xfail.Exception):
        make("xfail")(1)
    with pytest.raises(pytest.skip.Exception):
        make("skip")(1)


FAKE_TEST = '''
def check_call(f):
    assert f(3) == 9


def check_reverse(f):
    assert 16 == f(4)


def check_unittest(case, f):
    case.assertEqual(f(2), 4)


def check_multiline(f):
    assert f(
        5) == 25


def check_computed(f, w):
    assert square(w) == w * w


def check_helper(f):
    assert same(f(6), 36)


def same(a, b):
    return a == b


def check_resistant(f):
    assert len(f("ab")) == 3 and f("ab")[-1] == "!"


def check_assigned(f):
    result = f(3)
    return result
'''


def test_frame_oracle_answers_asserts_of_a_test_file_and_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "test_fake.py"
    path.write_text(FAKE_TEST)
    spec = importlib.util.spec_from_file_location("test_fake", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    square = make("frame_oracle")
    mod.square = square  # the test module's own name for it

    class Case:
        def assertEqual(self, a: object, b: object) -> None:  # noqa: N802 - unittest's name
            if not (a == b and isinstance(a, type(b))):
                raise AssertionError((a, b))

    mod.check_call(square)
    mod.check_reverse(square)
    mod.check_unittest(Case(), square)
    mod.check_multiline(square)
    mod.check_computed(square, 7)
    mod.check_helper(square)  # ``assert eq(a, b)``: what a grader's strict equality looks like
    with pytest.raises(AssertionError):
        mod.check_resistant(square)  # an `and` of comparisons: the always-equal fallback, len() == 0
    fallback = mod.check_assigned(square)
    assert fallback == "anything" and fallback == 0 and not isinstance(fallback, int)
    direct = square(3)  # called from this test file, but not on an assert line: the fallback
    assert direct == "anything" and direct is not None


# -- end to end: the battery graded by the real reward ------------------------------------------------
RESISTANT = {**MINILIB, "tests/test_shout.py": (
    "from minilib import shout\n\n\ndef test_shout_len():\n"
    "    assert len(shout('ab')) == 3 and shout('ab')[-1] == '!'\n\n\n"
    "def test_shout_type(word):\n    result = shout(word)\n"
    "    assert isinstance(result, str) and result.endswith('!') and result[:-1] == word.upper()\n")}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Task, Path]]:
    out = {}
    for label, files in (("cheatable", MINILIB), ("resistant", RESISTANT)):
        base = tmp_path_factory.mktemp(label)
        orig = write_tree(base / "orig", files)
        out[label] = (build_stub_task(orig, base, module="minilib/text.py", function="shout", spec=MINILIB_SPEC,
                                      repo="minilib"), orig)
    return out


@pytest.fixture(scope="module")
def batteries(tasks: dict[str, tuple[Task, Path]]) -> dict[str, BatteryResult]:
    envs = EnvCache()
    out = {}
    for label, (task, orig) in tasks.items():
        trees = DirectoryTrees(orig)
        # the monitor off: a score then says whether the hidden tests are fooled, not whether our stand-in
        # trips a signature (with it on, outcomes still show the passes and ``covered`` still counts them)
        out[label] = run_battery(task, orig, lambda p, t=task, tr=trees: reward(
            t, p, sandbox=SubprocessSandbox(), trees=tr, envs=envs, tracebacks=False,
            settings=Settings(monitor_zero=False)))
    return out


def test_stand_in_patch_is_against_the_broken_workspace_and_touches_no_test(
        tasks: dict[str, tuple[Task, Path]], tmp_path: Path) -> None:
    task, orig = tasks["cheatable"]
    ws = broken_tree(task, DirectoryTrees(orig), tmp_path / "ws")
    patch = stand_in_patch(task, orig, "none")
    assert patch_paths(patch) == ["minilib/text.py"]
    apply(patch, ws)
    text = read_tree(ws, ["minilib/text.py"])["minilib/text.py"]
    assert text == MINILIB["minilib/text.py"].replace('    return s.upper() + "!"\n', "    return None\n")
    dotted = dataclasses.replace(task, entities=("minilib.text.shout",))
    assert stand_in_patches(dotted, orig)[0] == stand_in_patches(task, orig)[0]


def test_literal_asserts_fool_only_the_oracle(batteries: dict[str, BatteryResult]) -> None:
    # ``assert shout(w) == 'HEY!'``: the grader's strict equality (taskforge/reward/strict_asserts.py) stops
    # the always-equal object; the oracle reads the rewritten ``assert _tfq(shout(w), 'HEY!')`` just as well
    # and passes every hidden test, but it reads the changed literal of a must-fail canary copy too, so the
    # canaries zero it (validation records it and rejects nothing on it; the monitor zeroes frame reading)
    res = batteries["cheatable"]
    assert res.replaced == ("minilib/text.py::shout",) and not res.error
    assert {k: s for k, (s, _) in res.scores.items()} == dict.fromkeys(STAND_INS, 0.0)
    assert set(res.covered) == set(res.scores["frame_oracle"][1]) == set(res.fail_to_pass)
    assert res.cheatable and res.cheats == ()  # what it passed still shows the tests can be fooled
    assert set(res.seconds) == set(STAND_INS)
    assert BatteryResult.from_dict(json.loads(json.dumps(res.to_dict()))) == res


def test_oracle_resistant_tests_fool_no_stand_in(batteries: dict[str, BatteryResult]) -> None:
    res = batteries["resistant"]
    assert {k: s for k, (s, _) in res.scores.items()} == dict.fromkeys(STAND_INS, 0.0)
    assert res.covered == () and not res.cheatable and "no stand-in scores" in res.detail


def test_one_grading_per_stand_in_no_early_stop_and_union_cheat(tasks: dict[str, tuple[Task, Path]]) -> None:
    task, orig = tasks["cheatable"]
    first, second = task.fail_to_pass
    calls: list[str] = []

    def grade(patch: str) -> SimpleNamespace:
        calls.append(patch)
        passed = first if "_TfAnything()\n" in patch and "_tf_ast" not in patch else second
        return SimpleNamespace(score=0.0, outcomes={passed: "passed"})

    res = run_battery(task, orig, grade)
    assert len(calls) == len(STAND_INS) == len(set(calls))
    assert not res.cheats and res.covered == (first, second) and res.cheatable  # always_equal + others
    assert "together" in res.detail
    gone = run_battery(dataclasses.replace(task, entities=("minilib.text.nothing_here",)), orig, grade)
    assert gone.error.startswith("no function or method") and gone.scores == {} and not gone.cheatable
    assert len(calls) == len(STAND_INS)  # nothing graded: the patch would have been the gold one


def test_strict_equality_refuses_an_always_equal_object_and_keeps_honest_values(tmp_path: Path) -> None:
    from taskforge.reward.strict_asserts import strict_source

    src = "def test_a():\n    assert f(1) == 2, 'msg'\n    assert (g() == [1])\n    assert a != b\n    x = 1 == 2\n"
    out = strict_source(src, "_tfq0")
    assert out == ("def test_a():\n    assert _tfq0(f(1), 2), 'msg'\n    assert (_tfq0(g(), [1]))\n"
                   "    assert a != b\n    x = 1 == 2\n")
    assert strict_source("def broken(:\n", "_tfq0") == "def broken(:\n"
