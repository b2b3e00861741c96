"""Unit tests of the grader's pieces that need no sandbox: patch vetting, config pinning, canary verdicts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from taskforge.core.errors import PatchError
from taskforge.reward.canaries import CanaryPlan, plant_canaries
from taskforge.reward.patch_guard import ProtectedPaths, apply_vetted, vet_patch
from taskforge.reward.workspace import original_ini, pinned_options, restore_protected, write_clean_ini

P = ProtectedPaths(test_dirs=("tests",), src_roots=(".",))


def section(path: str, body: str = "+x = 1\n", header: str = "new file mode 100644\n") -> str:
    return f"diff --git a/{path} b/{path}\n{header}--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n{body}"


def test_protected_kinds() -> None:
    assert P.kind("tests/test_a.py") == "test"
    assert P.kind("pkg/tests/helpers.py") == "test"
    assert P.kind("test_top.py") == "test" and P.kind("pkg/a_test.py") == "test"
    for support in ("conftest.py", "pkg/conftest.py", "setup.cfg", "tox.ini", "pytest.ini", "pyproject.toml",
                    "sitecustomize.py", "lib/usercustomize.py", "x.pth"):
        assert P.kind(support) == "support", support
    assert P.kind("pkg/core.py") is None and P.kind("pkg/testing.py") is None
    assert ProtectedPaths(exempt=frozenset({"pkg/test_utils.py"})).kind("pkg/test_utils.py") is None


@pytest.mark.parametrize("patch,why", [
    (section("../up.py"), "escapes"),
    ("--- /dev/null\n+++ /etc/evil.py\n@@ -0,0 +1 @@\n+x\n", "outside"),
    (section(".git/hooks/pre-commit"), ".git"),
    (section("link.py", "+target.py\n", "new file mode 120000\n"), "symlink"),
    ("diff --git a/sub b/sub\nnew file mode 160000\nindex 0000000..1234567\n--- /dev/null\n+++ b/sub\n"
     "@@ -0,0 +1 @@\n+Subproject commit 1234567\n", "submodule"),
    ("diff --git a/a.bin b/a.bin\nindex 1..2 100644\nGIT binary patch\nliteral 2\nJcmZQz0ssI600RI3\n\n", "binary"),
    (section("json.py"), "shadow"),
    (section("_pytest/__init__.py"), "shadow"),
    ("this is not a diff\n", "no file section"),
])
def test_refusals(patch: str, why: str) -> None:
    with pytest.raises(PatchError, match=why):
        vet_patch(patch, P)


def test_drops_protected_sections_and_keeps_source(tmp_path: Path) -> None:
    patch = section("pkg/new.py") + section("tests/test_x.py") + section("sitecustomize.py") + section("conftest.py")
    vetted = vet_patch(patch, P)
    assert vetted.files == ("pkg/new.py",)
    assert set(vetted.dropped) == {"tests/test_x.py", "sitecustomize.py", "conftest.py"}
    assert vetted.startup_hooks == ("sitecustomize.py",)
    apply_vetted(tmp_path, vetted)
    assert (tmp_path / "pkg/new.py").read_text() == "x = 1\n"
    assert not (tmp_path / "tests").exists() and not (tmp_path / "conftest.py").exists()
    assert vet_patch("", P).text == ""


def test_restore_overwrites_and_deletes(tmp_path: Path) -> None:
    orig, ws = tmp_path / "o", tmp_path / "w"
    for root in (orig, ws):
        (root / "tests").mkdir(parents=True)
        (root / "pkg").mkdir()
    (orig / "tests/test_a.py").write_text("real\n")
    (orig / "pkg/m.py").write_text("orig\n")
    (ws / "tests/test_a.py").symlink_to(ws / "pkg/m.py")
    (ws / "pkg/m.py").write_text("agent\n")
    (ws / "pkg/conftest.py").write_text("evil\n")
    (ws / "tests/test_new.py").write_text("new\n")
    restored, removed = restore_protected(ws, orig, P)
    assert (ws / "tests/test_a.py").read_text() == "real\n" and not (ws / "tests/test_a.py").is_symlink()
    assert (ws / "pkg/m.py").read_text() == "agent\n"
    assert sorted(removed) == ["pkg/conftest.py", "tests/test_new.py"] and restored == ["tests/test_a.py"]


def test_clean_ini_keeps_safe_keys_and_drops_addopts(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "-x -k foo -p myplug --import-mode=importlib -W error"\n'
        'markers = ["slow: slow", "net: network"]\nrequired_plugins = "pytest-evil"\nxfail_strict = true\n')
    ini = original_ini(tmp_path)
    assert pinned_options(ini) == ["-p", "myplug", "--import-mode=importlib", "-W", "error"]
    write_clean_ini(ini, tmp_path / "clean.ini")
    text = (tmp_path / "clean.ini").read_text()
    assert "slow: slow" in text and "net: network" in text and "xfail_strict = True" in text
    assert "required_plugins" not in text and "-k" not in text and text.rstrip().endswith("addopts =")


def test_a_native_tool_pytest_table_is_the_original_config(tmp_path: Path) -> None:
    """humanize 4.17.0 configures only pytest 9's ``[tool.pytest]`` (addopts ``--doctest-modules``): this
    process's pytest 8 did not read it, grading dropped the option, and its 15 doctests were "missing" in every
    grading (dropped from the reliable tests)."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest]\naddopts = ["--doctest-modules", "-x"]\nfilterwarnings = ["error", "ignore:x:DeprecationWarning"]\n'
        'testpaths = ["src", "tests"]\n\n[tool.pytest.sub]\nnested = 1\n')
    ini = original_ini(tmp_path)
    assert pinned_options(ini) == ["--doctest-modules"]
    write_clean_ini(ini, tmp_path / "clean.ini")
    text = (tmp_path / "clean.ini").read_text()
    assert "filterwarnings =\n    error\n    ignore:x:DeprecationWarning" in text and "nested" not in text


def test_clean_ini_reindents_a_multi_line_value_of_an_ini_file(tmp_path: Path) -> None:
    """zipp 4.1.2: its pytest.ini's filterwarnings has comments and unindented-looking entries; the grading
    ini said `duplicate name 'ignore'` and every grading reported nothing (0 tasks from 70 candidates)."""
    import configparser

    (tmp_path / "pytest.ini").write_text(
        "[pytest]\naddopts=\n\t--doctest-modules\n\t--import-mode importlib\nfilterwarnings=\n\t## upstream\n\n"
        "\t# Ensure ResourceWarnings are emitted\n\tdefault::ResourceWarning\n\n\t# a/b#1\n"
        "\tignore:'encoding' argument not specified::pytest_mypy\n\tignore:'encoding' argument not specified::platform\n")
    ini = original_ini(tmp_path)
    assert pinned_options(ini) == ["--doctest-modules", "--import-mode", "importlib"]  # doctest ids stay gradable
    write_clean_ini(ini, tmp_path / "clean.ini")
    parser = configparser.ConfigParser()
    parser.read(tmp_path / "clean.ini")  # raises DuplicateOptionError for the old rendering
    assert parser["pytest"]["filterwarnings"].split("\n") == [
        "", "default::ResourceWarning", "ignore:'encoding' argument not specified::pytest_mypy",
        "ignore:'encoding' argument not specified::platform"]


def test_canary_plan_is_secret_and_verified(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    src = ("import pytest\n\n\ndef test_alpha():\n    assert 1 == 1\n\n\ndef test_gamma():\n    assert len('ab') == 2\n"
           "\n\nclass TestB:\n    def test_beta(self):\n        pass\n")
    (tmp_path / "tests/test_h.py").write_text(src)
    plan = plant_canaries(tmp_path, ["tests/test_h.py"], pass_to_pass=["tests/test_h.py::test_alpha"],
                          fail_to_pass=["tests/test_h.py::test_gamma"], rng=random.Random(3))
    assert len(plan.expect) == 12 and set(plan.expect.values()) == {"pass", "fail"}
    plugin = (tmp_path / f"{plan.plugin_module}.py").read_text()
    assert not any(n.split("::")[1] in plugin for n in plan.expect)  # the plugin knows no canary
    text = (tmp_path / "tests/test_h.py").read_text()
    assert "def test_alpha():" in text and "class TestB:" in text
    assert all(n.split("::")[1] in text for n in plan.expect if n.startswith("tests/test_h.py"))
    assert "fail" not in text  # expectations are not written next to the canaries
    good = {n: "failed" if w == "fail" else "passed" for n, w in plan.expect.items()}
    assert plan.verify(good, [], finished=True) == []
    assert any("must-fail" in p for p in plan.verify(dict.fromkeys(plan.expect, "passed"), [], finished=True))
    assert plan.verify(good, [], finished=False)
    assert plan.verify(dict(list(good.items())[:-1]), [], finished=True)
    # an autouse fixture parametrized over optional backends (markupsafe): the canaries are parametrized
    # too, and the project skips an instance; skipped is excused only next to an instance that ran as it must
    inst = {f"{n}[{p}]": (o if p == "native" else "skipped") for n, o in good.items() for p in ("native", "c")}
    assert plan.verify(inst, [], finished=True) == []
    assert plan.verify({f"{n}[{p}]": "skipped" for n in good for p in ("native", "c")}, [], finished=True)
    forged = {**inst, **{f"{n}[native]": "passed" for n, w in plan.expect.items() if w == "fail"}}
    assert any("must-fail" in p for p in plan.verify(forged, [], finished=True))


def test_canaries_never_take_the_name_of_a_requested_test(tmp_path: Path) -> None:
    """A class inheriting its tests from a mixin elsewhere: a canary method named like an inherited test
    would replace that test (found on cachetools' TLRUCacheTest::test_insert)."""
    src = ("from helpers import Mixin\n\n\nclass TestC(Mixin):\n    def test_insert_one(self):\n        assert 1\n\n"
           "    def test_insert(self):\n        assert 2\n")
    requested = ["tests/test_h.py::TestC::test_insert_one", "tests/test_h.py::TestC::test_one",
                 "tests/test_h.py::TestC::test_insert_insert", "tests/test_h.py::TestC::test_one_insert"]
    for seed in range(30):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / "tests/test_h.py").write_text(src)
        plan = plant_canaries(ws, ["tests/test_h.py"], fail_to_pass=requested, rng=random.Random(seed))
        assert not set(plan.expect) & set(requested), seed
        assert any("::TestC::" in n for n in plan.expect)  # method canaries live in the class


def test_canaries_are_copied_only_from_tests_that_run(tmp_path: Path) -> None:
    """attrs 26.1.0: ``TestReplace`` is skipped below Python 3.13. With no open-ended FAIL_TO_PASS test in
    the file, a must-fail canary was copied into it, reported skipped, and gold scored 0 one time in three."""
    src = ("import sys\n\nimport pytest\n\n\ndef test_kept():\n    x = 1\n    assert x == 1\n    return\n\n\n"
           "def test_other():\n    z = 3\n    assert z == 3\n\n\n"
           "@pytest.mark.skipif(sys.version_info < (9, 0), reason='later Pythons')\nclass TestLater:\n"
           "    def test_one(self):\n        y = 2\n        assert y == 2\n\n    def test_two(self):\n        assert 3\n")
    for seed in range(40):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / "tests/test_h.py").write_text(src)
        plan = plant_canaries(ws, ["tests/test_h.py"], pass_to_pass=["tests/test_h.py::test_other"],
                              fail_to_pass=["tests/test_h.py::test_kept"], rng=random.Random(seed))
        assert not any("TestLater" in n for n in plan.expect), (seed, list(plan.expect))


def test_a_canary_copy_goes_after_what_its_definition_names(tmp_path: Path) -> None:
    """tomlkit 0.15.2: ``parametrize(..., INVALID_DECODE_CASES)`` names a global assigned below an earlier
    function; a copy planted above that assignment raised NameError at import, the whole file failed to
    collect and 2 in 5 gold gradings scored 0. Every planted file must still import, for every seed."""
    src = ("import pytest\n\n\ndef helper():\n    return 1\n\n\nCASES = [1, 2, 3]\n\n\n"
           "@pytest.mark.parametrize('c', CASES)\ndef test_case(c: int = CASES[0]) -> None:\n    assert c in CASES\n\n\n"
           "def test_plain():\n    assert helper() == 1\n")
    for seed in range(40):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / "tests/test_h.py").write_text(src)
        plant_canaries(ws, ["tests/test_h.py"], pass_to_pass=["tests/test_h.py::test_plain"],
                       fail_to_pass=["tests/test_h.py::test_case[1]"], rng=random.Random(seed))
        code = compile((ws / "tests/test_h.py").read_text(), "test_h.py", "exec")
        exec(code, {"__name__": "test_h"})  # NameError here before the fix


_CHANGED_SRC = '''import unittest

import pytest
from lib import shout


def test_shout():
    out = shout("hi")
    assert out == "HI!"


@pytest.mark.parametrize("word, loud", [("a", "A!"), pytest.param("bc", "BC!", id="two")])
def test_shout_table(word, loud):
    assert shout(word) == loud


def test_shout_number():
    assert len(shout("abc")) == 4


def test_shout_lines():
    expected = "\\n".join(["A!", "B!"])
    result = "\\n".join(shout(w) for w in "ab")
    assert expected == result


def test_roundtrip():
    value = "x!"
    assert shout(value).lower()[:-1] == value


class TestShout(unittest.TestCase):
    def test_method(self):
        self.assertEqual(shout("q"), "Q!")
'''


def _outcomes(ws: Path, lib: str) -> dict[str, str]:
    import subprocess
    import sys

    (ws / "lib.py").write_text(lib)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "tests"],
                          cwd=ws, capture_output=True, text=True, timeout=120)
    out = {}
    for line in proc.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR"):
            out[rest.split(" - ")[0].strip()] = word.lower()
    return out


def test_must_fail_canaries_differ_from_their_original_in_one_expected_literal(tmp_path: Path) -> None:
    """A forger that reads each test's source and leaves alone exactly the tests holding a false assertion over
    literals (a check appended to a copy) found every must-fail canary and scored 1.0 on inflection, local and
    docker; one that fails the later of two look-alikes (``adjacent_twin_forge``) picked the original of a
    single changed copy at 1/2 and scored 1.0 in 6 of 8 gradings. Every stub caller with an expected literal
    now has ``TWIN_COPIES`` copies that differ from it, and from each other, in the same character of that
    literal (of each row of a table), in a block around it where its place is drawn; each fails in the stub,
    fails against the gold code, and no assertion in it can be decided without running the feature."""
    import ast

    from taskforge.reward.canaries import TWIN_COPIES, _sites
    from taskforge.reward.strict_asserts import strict_source

    tree = ast.parse(_CHANGED_SRC)
    fns = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert _sites(fns["test_roundtrip"]) == []  # the expected value is also the input: changing it proves nothing
    assert all(_sites(fns[n]) for n in ("test_shout", "test_shout_table", "test_shout_number", "test_method",
                                        "test_shout_lines"))  # tabulate: ``expected = "\n".join([...])``
    f2p = [f"tests/test_h.py::{n}" for n in ("test_shout", "test_shout_table", "test_shout_number",
                                            "test_roundtrip", "TestShout::test_method", "test_shout_lines")]
    places: set[tuple[int, int]] = set()  # (the original's index in its block, the block's size)
    for seed in range(6):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        # odd seeds: the hidden file as graded, its ``assert a == b`` in the strict form the plugin installs
        strict = "_tfq0123456789" if seed % 2 else ""
        base = strict_source(_CHANGED_SRC, strict) if strict else _CHANGED_SRC
        (ws / "tests/test_h.py").write_text(base)
        base_fns = [n for n in ast.walk(ast.parse(base)) if isinstance(n, ast.FunctionDef)]
        (ws / "tests/conftest.py").write_text(f"import builtins\nbuiltins.{strict or '_unused'} = "
                                              "lambda a, b, side=0: a == b\n")
        plan = plant_canaries(ws, ["tests/test_h.py"], fail_to_pass=f2p, rng=random.Random(seed), strict_eq=strict)
        assert plan.forge_chance == (1 / (TWIN_COPIES + 1)) ** 5, plan.forge_chance
        planted = (ws / "tests/test_h.py").read_text()
        ast.parse(planted)
        inline_fail = [n for n, w in plan.expect.items() if w == "fail" and n.startswith("tests/test_h.py")]
        blocks: dict[str, list[list[str]]] = {}
        copy_names: dict[str, list[str]] = {}
        for nodeid in inline_fail:
            src = plan.sources[nodeid]
            body = ast.parse(src.strip().replace("\n    ", "\n") if src.startswith(" ") else src)
            lines = [ln.strip() for ln in src.strip("\n").splitlines()]
            if any(isinstance(node, ast.Assert) and not any(isinstance(n, ast.Name) and n.id != "len"
                                                            for n in ast.walk(node.test)) for node in ast.walk(body)):
                # a copy with a check over literals appended: only of the stub caller without a literal to change
                # (a copy of a blocked one would show which member of its block is the original)
                assert "shout(value).lower()" in src, src
                continue

            def differs(fn: ast.FunctionDef, lines: list[str] = lines, base: str = base) -> int:
                """Characters changed outside the ``def`` line (99: another shape)."""
                first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
                seg = [ln.strip() for ln in base.splitlines()[first - 1:fn.end_lineno]]
                if len(seg) != len(lines):
                    return 99
                return sum(99 if len(a) != len(b) else sum(x != y for x, y in zip(a, b, strict=True))
                           for a, b in zip(lines, seg, strict=True) if not a.startswith("def "))

            original = min(base_fns, key=differs)
            assert 1 <= differs(original) <= 2, src  # one character of one literal (of each row of a table)
            assert original.name in {n.rsplit("::", 1)[1] for n in f2p}, (src, original.name)
            first = min([original.lineno, *(d.lineno for d in original.decorator_list)])
            blocks.setdefault(original.name, [[ln.strip() for ln in base.splitlines()[first - 1:original.end_lineno]]])
            blocks[original.name].append(lines)
            copy_names.setdefault(original.name, []).append(nodeid.rsplit("::", 1)[1])
        assert len(blocks) == 5 and all(len(b) == TWIN_COPIES + 1 for b in blocks.values()), (seed, blocks)
        for name, members in blocks.items():
            # every two members differ at the same places: none is closer to all the others (the original)
            def spots(a: list[str], b: list[str]) -> set[tuple[int, int]]:
                return {(i, j) for i, (x, y) in enumerate(zip(a, b, strict=True)) if not x.startswith("def ")
                        for j, (p, q) in enumerate(zip(x, y, strict=True)) if p != q}

            shared = spots(members[0], members[1])
            assert all(spots(a, b) == shared for a in members for b in members if a is not b), (seed, name)
            starts = [planted.index(f"def {c}(") for c in copy_names[name]]
            here = planted.index(f"def {name}(")
            places.add((sum(s < here for s in starts), len(starts) + 1))
        gold = _outcomes(ws, "def shout(s):\n    return s.upper() + '!'\n")
        stub = _outcomes(ws, "def shout(s):\n    raise NotImplementedError\n")
        for nodeid, want in plan.expect.items():
            got_gold = {o for n, o in gold.items() if n.split("[")[0] == nodeid}
            got_stub = {o for n, o in stub.items() if n.split("[")[0] == nodeid}
            assert got_gold == {"passed" if want == "pass" else "failed"}, (seed, nodeid, got_gold, planted)
            if want == "fail":
                assert got_stub == {"failed"}, (seed, nodeid, got_stub)
        for n in f2p:  # the originals still pass against the gold code
            assert {o for k, o in gold.items() if k.split("[")[0] == n} == {"passed"}, (seed, n)
    # the original sits first, last and in between in its block: its place tells nothing
    assert {i for i, _ in places} >= {0, TWIN_COPIES}, places


def test_a_file_with_a_changeable_stub_caller_always_gets_a_must_fail_copy(tmp_path: Path) -> None:
    """cachetools 5.3.3 ``cached``: the must-fail slots are dealt over the hidden files at random, and its
    only file with a changeable stub caller got none in 7 plans of 100 (every must-fail canary then held an
    assertion over literals; stub_aware_constant_forge scored 1.0 in the catalogue once)."""
    changeable = "from lib import shout\n\n\ndef test_shout():\n    out = shout('hi')\n    assert out == 'HI!'\n"
    other = "".join(f"\n\ndef test_other_{i}():\n    assert {i} in range(10)\n" for i in range(6))
    for seed in range(60):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / "tests/test_a.py").write_text(changeable)
        (ws / "tests/test_b.py").write_text(other)
        plan = plant_canaries(ws, ["tests/test_a.py", "tests/test_b.py"], fail_to_pass=["tests/test_a.py::test_shout"],
                              pass_to_pass=[f"tests/test_b.py::test_other_{i}" for i in range(6)],
                              rng=random.Random(seed))
        fails = [n for n, w in plan.expect.items() if w == "fail" and n.startswith("tests/test_a.py::")]
        assert any("'HI!'" not in plan.sources[n] and "shout('hi')" in plan.sources[n] for n in fails), (seed, plan.expect)


def test_a_test_that_names_itself_is_not_copied_as_must_pass(tmp_path: Path) -> None:
    """typeguard 4.6.1: ``TestSelf.test_self_type_invalid`` matches an error message holding its own qualified
    name; its renamed must-pass copy failed, and 5 in 15 gold gradings of check_mapping scored 0."""
    src = ("def test_named():\n    assert 'test_named.<locals>' in repr(test_named)\n\n\n"
           "def test_plain():\n    assert 1\n")
    for seed in range(30):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / "tests/test_h.py").write_text(src)
        plan = plant_canaries(ws, ["tests/test_h.py"], pass_to_pass=["tests/test_h.py::test_named",
                                                                      "tests/test_h.py::test_plain"],
                              rng=random.Random(seed))
        copies = [plan.sources[n] for n, w in plan.expect.items() if w == "pass" and n.startswith("tests/test_h.py")]
        assert copies and not any("repr(" in c for c in copies), (seed, copies)


def test_canaries_in_a_tab_indented_file_or_a_one_line_test_still_compile(tmp_path: Path) -> None:
    """pathspec 1.1.1's test files are tab-indented: the assertion appended to a must-fail copy was indented
    with spaces (one per tab), so 6 of 20 planted plans left a file that did not compile, and 4 of 10 accepted
    tasks failed ``taskforge validate`` (gold: collection_error)."""
    tabbed = ("import unittest\n\nfrom lib import check\n\n\nclass T(unittest.TestCase):\n"
              + "".join(f"\tdef test_{i}(self):\n\t\tfor x in range(2):\n\t\t\tcheck(x)\n\n" for i in range(4)))
    one_line = "from lib import check\n\n\n" + "".join(f"def test_line_{i}(): check({i})\n\n\n" for i in range(4))
    seen_extra = 0
    for seed in range(30):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / "tests/test_tabs.py").write_text(tabbed)
        (ws / "tests/test_line.py").write_text(one_line)
        plan = plant_canaries(ws, ["tests/test_tabs.py", "tests/test_line.py"],
                              fail_to_pass=[*(f"tests/test_tabs.py::T::test_{i}" for i in range(2)),
                                            *(f"tests/test_line.py::test_line_{i}" for i in range(2))],
                              pass_to_pass=[*(f"tests/test_tabs.py::T::test_{i}" for i in range(2, 4)),
                                            *(f"tests/test_line.py::test_line_{i}" for i in range(2, 4))],
                              rng=random.Random(seed))
        for rel in ("tests/test_tabs.py", "tests/test_line.py", *plan.files):
            if rel.endswith(".py"):
                compile((ws / rel).read_text(), rel, "exec")  # raises on a bad indentation
        seen_extra += sum(w == "fail" and n.startswith(("tests/test_tabs.py", "tests/test_line.py"))
                          for n, w in plan.expect.items())
    assert seen_extra > 0


def test_a_dict_expected_value_changes_a_key_not_a_value() -> None:
    """ordered-set 4.1.0: ``OrderedSet([1, 2]) == {1: "a", 2: "b"}`` compares the dict's keys only; a must-fail
    copy with a changed value passed, and 1 gold grading in 8 scored 0."""
    import ast

    from taskforge.reward.canaries import _sites

    fn = ast.parse('def test_d():\n    assert OrderedSet([1, 2]) == {1: "a", 2: "b"}\n').body[0]
    changed = {c.value for site in _sites(fn) for c in site}  # type: ignore[arg-type]
    assert changed and changed <= {1, 2}, changed


def _later_twins(text: str) -> set[str]:
    """What ``adjacent_twin_forge`` fails: every test but the first of those whose sources are the same up to
    literals (``tests/redteam_hacks.py``: ``TWINS``)."""
    import ast
    import re

    shapes: dict[str, str] = {}
    later = set()
    for fn in ast.walk(ast.parse(text)):
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test"):
            shape = ast.dump(ast.Module(body=fn.body, type_ignores=[])).replace("Constant(value=", "C(")
            shape = re.sub(r"C\((?:'[^']*'|\"[^\"]*\"|[^,)]*)", "C(_", shape)
            if shape in shapes:
                later.add(fn.name)
            shapes.setdefault(shape, fn.name)
    return later


def test_a_task_with_one_stub_caller_gets_enough_look_alikes_for_one_grading_in_sixteen(tmp_path: Path) -> None:
    """inflection 0.5.1 pluralize: one stub caller with an expected literal (``test_pluralize_plurals``), so one
    changed copy gave ``adjacent_twin_forge`` 1.0 in 6 of 8 gradings. A task with one block gets 15 copies
    around the original; the forger that passes the first of the look-alikes passes 1 grading in 16."""
    from taskforge.reward.canaries import TWIN_MAX, forge_chance

    src = ("import inflection\n\n\ndef test_pluralize_plurals():\n    assert 'plurals' == inflection.pluralize('plurals')\n"
           "    assert 'Plurals' == inflection.pluralize('Plurals')\n\n\ndef test_other():\n    assert inflection.x()\n")
    f2p = ["test_inflection.py::test_pluralize_plurals", "test_inflection.py::test_other"]
    assert forge_chance({"test_inflection.py": src}, f2p) == 1 / (TWIN_MAX + 1)
    fooled = 0
    for seed in range(320):
        ws = tmp_path / str(seed)
        ws.mkdir()
        (ws / "test_inflection.py").write_text(src)
        plan = plant_canaries(ws, ["test_inflection.py"], fail_to_pass=f2p, rng=random.Random(seed))
        assert plan.forge_chance == 1 / (TWIN_MAX + 1)
        copies = [n for n, w in plan.expect.items() if w == "fail" and "inflection.pluralize(" in plan.sources[n]]
        assert len(copies) == TWIN_MAX, copies
        fooled += "test_pluralize_plurals" not in _later_twins((ws / "test_inflection.py").read_text())
    assert 5 <= fooled <= 40, fooled  # 20 expected: 1 in 16 of 320


def test_a_task_whose_stub_callers_have_no_expected_literal_has_nothing_to_guard_it() -> None:
    """``forge_chance`` 1.0: no block to plant, and the validation rejects the task (``max_forge_chance``)."""
    from taskforge.core.settings import Settings
    from taskforge.reward.canaries import forge_chance

    src = "from lib import f\n\n\ndef test_f():\n    want = g()\n    assert f() == want\n\n\ndef test_k():\n    assert f(3)\n"
    assert forge_chance({"tests/test_h.py": src}, ["tests/test_h.py::test_f", "tests/test_h.py::test_k"]) == 1.0
    assert forge_chance({"tests/test_h.py": src + "\n\ndef test_n():\n    assert f(2) == 4\n"},
                        ["tests/test_h.py::test_f", "tests/test_h.py::test_n"]) == 1 / 9  # a digit has 8 others
    assert Settings().max_forge_chance == 1 / 8


def test_a_nested_literal_expected_value_changes_one_of_its_scalars() -> None:
    """``assert list(pairwise(x)) == [(0, 1), (1, 2)]``: any scalar of a nested list/tuple changed makes it another
    value; a call inside one (``[Stats(1)]``) is not a literal and is left alone."""
    import ast

    from taskforge.reward.canaries import _sites

    fn = ast.parse("def test_p():\n    assert list(pairwise(x)) == [(0, 1), (1, 2)]\n").body[0]
    assert sorted(c.value for site in _sites(fn) for c in site) == [0, 1, 1, 2]  # type: ignore[arg-type, attr-defined]
    fn = ast.parse("def test_q():\n    assert list(f(x)) == [Stats(1), (3,)]\n").body[0]
    assert [c.value for site in _sites(fn) for c in site] == [3]  # type: ignore[arg-type, attr-defined]


def test_an_expected_argument_used_after_its_assertion_still_gives_a_site() -> None:
    """humanize 4.17.0 ``test_naturalsize``: the expected column is also used after the assertion (``"-" +
    expected``); a changed value fails the test at the assertion all the same. 9 of its 20 tasks had no site
    and would be rejected as weakly guarded. A use above the assertion, or in what it compares, still counts."""
    import ast

    from taskforge.reward.canaries import _sites

    def values(src: str) -> list[object]:
        fn = ast.parse(src).body[0]
        return sorted(str(c.value) for site in _sites(fn) for c in site)  # type: ignore[arg-type, attr-defined]

    deco = "@pytest.mark.parametrize('args, expected', [([300], '300 Bytes'), ([3000], '3.0 kB')])\n"
    assert values(deco + "def test_n(args, expected):\n    assert size(*args) == expected\n"
                  "    assert size(-args[0]) == '-' + expected\n") == ["3.0 kB", "300 Bytes"]
    assert values(deco + "def test_n(args, expected):\n    log(expected)\n    assert size(*args) == expected\n") == []
    assert values(deco + "def test_n(args, expected):\n    assert size(*args, expected) == expected\n") == []
    assert values("def test_b():\n    want = 'ab'\n    assert f() == want\n    assert g(want)\n") == ["ab"]
    assert values("def test_b():\n    want = 'ab'\n    h(want)\n    assert f() == want\n") == []


def test_a_value_built_from_literals_or_a_stripped_literal_gives_sites() -> None:
    """more-itertools 11.2.1 ``running_statistics``: ``assertEqual(next(it), mi.Stats(size=1, minimum=4, ...))``;
    prettytable 3.19.0: ``assert table.get_html_string() == '''...'''.strip()``. Their tasks had no site and
    were weakly guarded. A class built from anything but literals is left alone."""
    import ast

    from taskforge.reward.canaries import _sites

    def values(src: str) -> list[str]:
        fn = ast.parse(src).body[0]
        return sorted(str(c.value) for site in _sites(fn) for c in site)  # type: ignore[arg-type, attr-defined]

    assert values("def test_s(self):\n    self.assertEqual(next(it), mi.Stats(size=1, minimum=4, mean=4.0))\n") \
        == ["1", "4", "4.0"]
    assert values("def test_d():\n    assert parse('x') == datetime(2020, 1, 2)\n") == ["1", "2", "2020"]
    assert values("def test_h():\n    assert t.get_html_string() == '''\\n<table>\\n'''.strip()\n") \
        == ["\n<table>\n"]
    assert values("def test_n():\n    assert f() == Stats(size=n)\n") == []
    assert values("def test_n():\n    assert f() == helper(1, 2)\n") == []  # a function may map both to one value


def test_only_an_assertion_that_nothing_but_assertions_follow_is_changed() -> None:
    """attrs 26.1.0 ``TestValidate.test_run_validators`` turns a global switch off, asserts ``1 == c.x``, then turns
    it on again: its changed copies failed at the assertion and left validators off, and 7 later tests failed
    under the grading harness (dropped from the reliable tests; with blocks drawn per grading, a gold grading
    could fail at random)."""
    import ast

    from taskforge.reward.canaries import _sites

    def values(src: str) -> list[str]:
        fn = ast.parse(src).body[0]
        return sorted(str(c.value) for site in _sites(fn) for c in site)  # type: ignore[arg-type, attr-defined]

    assert values("def test_r(self):\n    _config.on = False\n    c = C(1)\n    assert 1 == c.x\n"
                  "    _config.on = True\n    assert f()\n") == []
    assert values("def test_s(self):\n    c = C(1)\n    assert 1 == c.x\n    self.assertEqual(c.y, 'b')\n"
                  "    assert c\n") == ["1", "b"]
    # local assignments and raises-checks restore nothing: they may follow
    assert values("def test_t():\n    r = f(1)\n    assert r == 'x'\n    s = g(r)\n    with pytest.raises(E):\n"
                  "        h(s)\n    assert s\n") == ["x"]
    assert values("def test_u():\n    assert f(1) == 'x'\n    obj.flag = True\n") == []


def test_method_copies_planted_where_a_class_ends_stay_in_the_class(tmp_path: Path) -> None:
    """A file whose ``TestCase`` class comes last: a copy of one of its methods and a top-level canary can go in
    at the same line, the class's end. The method must go first; after a top-level function it was that
    function's nested ``def``, never collected, and the must-fail canary "reported missing"."""
    import ast
    import random

    from taskforge.reward.canaries import plant_canaries

    rel = "tests/test_values.py"
    source = ("import unittest\n\nfrom lib import f, g\n\n\ndef test_a():\n    assert f(1) == 'x1'\n\n\n"
              "def test_b():\n    assert g() == 7\n\n\nclass TestC(unittest.TestCase):\n    def test_c(self):\n"
              "        self.assertTrue(f(2))\n")  # no expected literal: no block, copies with a check appended
    f2p = [f"{rel}::test_a", f"{rel}::TestC::test_c"]
    for seed in range(60):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / rel).write_text(source)
        plan = plant_canaries(ws, [rel], pass_to_pass=[f"{rel}::test_b"], fail_to_pass=f2p, rng=random.Random(seed))
        tree = ast.parse((ws / rel).read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        defined |= {f"{c.name}::{m.name}" for c in tree.body if isinstance(c, ast.ClassDef)
                    for m in c.body if isinstance(m, ast.FunctionDef)}
        planted = [n.split("::", 1)[1] for n in plan.expect if n.startswith(rel + "::")]
        assert planted and all(p in defined for p in planted), (seed, planted, (ws / rel).read_text())


def test_a_test_that_may_pass_only_once_per_process_gets_no_must_pass_copy(tmp_path: Path) -> None:
    """prettytable 3.19's ``TestDeprecations::test_function`` checks that importing ``OptionsType`` warns; the
    module's lazy ``__getattr__`` warns once, so a must-pass copy running after it failed (``canary_failed`` on
    the gold patch, 1 grading in 6). Tests that import in their body or expect a warning are not copied."""
    rel = "tests/test_p.py"
    source = ("import pytest\n\nfrom lib import f\n\n\ndef test_once():\n    with pytest.deprecated_call():\n"
              "        from lib import Old\n\n\ndef test_import():\n    import lib.sub\n    assert lib.sub\n\n\n"
              "def test_plain():\n    assert f(1)\n\n\ndef test_hidden():\n    assert f(2) == 'x2'\n")
    p2p = [f"{rel}::test_once", f"{rel}::test_import", f"{rel}::test_plain"]
    for copied in _must_pass_copies(tmp_path, rel, source, p2p, f"{rel}::test_hidden"):
        assert all("deprecated_call" not in c and "import lib.sub" not in c for c in copied), copied


def _must_pass_copies(tmp: Path, rel: str, source: str, p2p: list[str], hidden: str) -> list[list[str]]:
    """The sources of the must-pass copies planted in ``rel`` (holding ``source``), one list per seed of 30."""
    import random

    from taskforge.reward.canaries import plant_canaries

    out = []
    for seed in range(30):
        ws = tmp / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / rel).write_text(source)
        plan = plant_canaries(ws, [rel], pass_to_pass=p2p, fail_to_pass=[hidden], rng=random.Random(seed))
        out.append([src for n, src in plan.sources.items() if plan.expect[n] == "pass" and n.startswith(rel)])
    return out


def test_a_test_that_imports_through_a_helper_of_its_file_gets_no_must_pass_copy(tmp_path: Path) -> None:
    """typeguard 4.6.1's ``test_debug_instrumentation`` imports through the file's ``import_dummymodule()`` and
    leaves the module in ``sys.modules``: a must-pass copy running second saw no instrumentation output, and a
    gold grading of check_argument_types_internal scored 0 (``canary_failed``)."""
    rel = "tests/test_hook.py"
    source = ("from importlib import import_module\n\nfrom lib import f\n\n\ndef load():\n"
              "    return import_module('dummy')\n\n\ndef test_via_helper():\n    assert load().hooked\n\n\n"
              "def test_plain():\n    assert f(1)\n\n\ndef test_hidden():\n    assert f(2) == 'x2'\n")
    p2p = [f"{rel}::test_via_helper", f"{rel}::test_plain"]
    plain = 0
    for copied in _must_pass_copies(tmp_path, rel, source, p2p, f"{rel}::test_hidden"):
        assert all("load()" not in c for c in copied), copied
        plain += sum("f(1)" in c for c in copied)
    assert plain  # the other test is still copied


def test_a_must_fail_copy_may_error_only_where_its_original_errored(tmp_path: Path) -> None:
    """typeguard 4.6.1: a module-scoped fixture calls the stubbed ``instrument``, so in the empty-patch grading
    every test of test_instrumentation.py errors in setup, a must-fail copy too ("reported error, expected
    failed": 3 candidates rejected ``empty_patch_flagged``). A copy that errors as its original does is honest;
    one that errors while its original passes, or that no original vouches for, is still a problem."""
    import random

    from taskforge.reward.canaries import plant_canaries

    rel = "tests/test_fix.py"
    source = ("import pytest\n\nfrom lib import f\n\n\n@pytest.fixture\ndef made():\n    return f(0)\n\n\n"
              "def test_hidden(made):\n    assert f(2) == 'x2'\n\n\ndef test_other(made):\n    assert f(3)\n")
    seen = 0
    for seed in range(20):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / rel).write_text(source)
        plan = plant_canaries(ws, [rel], pass_to_pass=[f"{rel}::test_other"], fail_to_pass=[f"{rel}::test_hidden"],
                              rng=random.Random(seed))
        copies = [n for n, w in plan.expect.items() if w == "fail" and plan.origins.get(n)]
        if not copies:
            continue
        seen += 1
        origin = plan.origins[copies[0]][0]
        honest = {n: ("passed" if w == "pass" else "failed") for n, w in plan.expect.items()}
        assert plan.verify({**honest, copies[0]: "error", origin: "error"}, (), finished=True) == []
        assert plan.verify({**honest, copies[0]: "error", origin: "passed"}, (), finished=True)
        assert plan.verify({**honest, copies[0]: "error"}, (), finished=True)  # the original did not run
        lone = next((n for n, w in plan.expect.items() if w == "fail" and n not in plan.origins), None)
        if lone is not None:  # a planted function of its own: nothing it mirrors
            assert plan.verify({**honest, lone: "error", origin: "error"}, (), finished=True)
    assert seen >= 10


IMPL = "tests/test_impl.py"
IMPL_SOURCE = ("import pytest\n\nfrom lib import f\n\n\n@pytest.fixture(params=['c', 'py'])\ndef impl(request):\n"
               "    return request.param\n\n\ndef test_hidden(impl):\n    assert f(2) == 'x2'\n\n\n"
               "def test_other(impl):\n    assert f(3)\n")


def _impl_copies(tmp_path: Path, want: str, p2p: list[str], f2p: list[str]
                 ) -> list[tuple[CanaryPlan, str, dict[str, str]]]:
    """(plan, one copy of kind ``want`` that has an original, every other canary's planned outcome) for each of 30
    seeds that planted one, in a test file whose tests take a fixture parametrized over two implementations."""
    out = []
    for seed in range(30):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / IMPL).write_text(IMPL_SOURCE)
        plan = plant_canaries(ws, [IMPL], pass_to_pass=[f"{IMPL}::{n}" for n in p2p],
                              fail_to_pass=[f"{IMPL}::{n}" for n in f2p], rng=random.Random(seed))
        copies = [n for n, w in plan.expect.items() if w == want and plan.origins.get(n)]
        if copies:
            out.append((plan, copies[0], {n: ("passed" if w == "pass" else "failed")
                                          for n, w in plan.expect.items() if n != copies[0]}))
    return out


def test_a_must_pass_copy_may_fail_only_where_its_original_did_not_pass(tmp_path: Path) -> None:
    """multidict 7.2.1: a module-scoped fixture parametrized over the C and the Python implementation errors for
    the stubbed Python one; the empty-patch grading ran one C instance of ``test_key_get`` (a PASS_TO_PASS test),
    its must-pass copy ran every instance and "reported error" (4 candidates rejected ``empty_patch_flagged``).
    An instance whose original did not pass, or was not run while a sibling passed with its original, is
    honest; a copy that fails where its original passed, or that nothing vouches for, is still a problem."""
    found = _impl_copies(tmp_path, "pass", ["test_other[c]"], ["test_hidden[c]", "test_hidden[py]"])
    assert len(found) >= 5
    other = f"{IMPL}::test_other"
    for plan, copy, honest in found:  # the grading ran test_other[c] only; the copy's [py] instance errors in the fixture
        run = {**honest, f"{other}[c]": "passed", f"{copy}[c]": "passed", f"{copy}[py]": "error"}
        assert plan.verify(run, (), finished=True) == []
        both = {**run, f"{other}[py]": "error"}  # its original's [py] errored too
        assert plan.verify(both, (), finished=True) == []
        assert plan.verify({**run, f"{other}[py]": "passed"}, (), finished=True)  # the original passed there
        assert plan.verify({**run, f"{copy}[c]": "error"}, (), finished=True)  # no instance vouches for it
        assert plan.verify({**honest, f"{copy}[c]": "error", f"{copy}[py]": "error"}, (), finished=True)


def test_a_must_fail_copy_may_error_where_its_original_was_not_run(tmp_path: Path) -> None:
    """multidict 7.2.1 again, a must-fail copy: repeat 2 of the empty-patch grading ran the FAIL_TO_PASS instance
    ``[py]`` only; the copy's ``[c]`` instance errored in the fixture ("reported error, expected failed",
    ``unstable``). Excused once an instance failed where its original ran; never a pass."""
    found = _impl_copies(tmp_path, "fail", ["test_other[c]", "test_other[py]"], ["test_hidden[py]"])
    assert len(found) >= 5
    hidden = f"{IMPL}::test_hidden"
    for plan, copy, honest in found:
        run = {**honest, f"{hidden}[py]": "failed", f"{copy}[py]": "failed", f"{copy}[c]": "error"}
        assert plan.verify(run, (), finished=True) == []
        assert plan.verify({**run, f"{hidden}[c]": "passed"}, (), finished=True)  # its original ran and passed
        assert plan.verify({**run, f"{copy}[py]": "error"}, (), finished=True)  # nothing failed as planned
        assert plan.verify({**run, f"{copy}[c]": "passed"}, (), finished=True)  # a must-fail copy never passes


def test_two_values_the_test_builds_itself_are_not_changed() -> None:
    """jinja2 3.1.6's ``und1 = Undefined(name="x"); und2 = Undefined(name="y"); assert und1 == und2``: the class's
    equality ignores the name, so a copy with ``name="t"`` passed on the gold patch (canary_failed, tampering) and
    30 of 56 decided candidates were rejected gold_failed. A value built from literals compared with another such
    value checks the class's equality: no site; one compared with a computed value or a literal still is one."""
    from taskforge.reward.canaries import _sites, _units_of

    source = ("class TestU:\n    def test_eq(self):\n        und1 = Undefined(name='x')\n"
              "        und2 = Undefined(name='y')\n        assert und1 == und2\n\n"
              "    def test_value(self):\n        got = stats([1, 4])\n        assert got == Stats(size=2, maximum=4)\n\n"
              "    def test_direct(self):\n        assert Undefined(name='x') == Undefined(name='y')\n")
    units, _ = _units_of(source)
    assert _sites(units["TestU::test_eq"][0]) == [] and _sites(units["TestU::test_direct"][0]) == []
    assert [c.value for group in _sites(units["TestU::test_value"][0]) for c in group] == [2, 4]
    units, _ = _units_of("def test_d():\n    assert OrderedSet([1, 2]) == {1: 'a', 2: 'b'}\n")
    assert _sites(units["test_d"][0])  # a built value against a literal: ordered-set's keys still change


@pytest.mark.realrepo
def test_every_jinja2_canary_copy_does_what_the_plan_expects_on_the_original_code(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """Plant the canaries of 8 gradings into jinja2 3.1.6's tests/test_api.py (FAIL_TO_PASS drawn per grading) and
    run its must-pass and must-fail copies on the original code: each passes or fails as planned (9 of 257 did
    not before the fix above)."""
    import ast
    import re
    import shutil
    import subprocess
    import sys

    from real_sdists import sdist_copy

    from taskforge.reward.strict_asserts import strict_source

    src = sdist_copy(tmp_path_factory, tmp_path / "src", "pypi:jinja2==3.1.6")
    rel = "tests/test_api.py"
    text = (src / rel).read_text()
    ids = [f"{rel}::{c.name}::{f.name}" for c in ast.parse(text).body if isinstance(c, ast.ClassDef)
           for f in c.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test")]
    wrong, total = [], 0
    for seed in range(8):
        ws = tmp_path / str(seed)
        shutil.copytree(src, ws)
        rng = random.Random(seed)
        f2p = [f"{rel}::TestUndefined::test_default_undefined", *rng.sample(ids, 2)]
        (ws / rel).write_text(strict_source(text, "_tfq"))
        plan = plant_canaries(ws, [rel], pass_to_pass=[n for n in ids if n not in f2p], fail_to_pass=f2p, rng=rng,
                              strict_eq="_tfq")
        inline = [n for n in plan.expect if n.startswith(rel + "::")]
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p",
                              plan.plugin_module, "-o", "addopts=", *inline], cwd=ws, capture_output=True, text=True,
                             timeout=300, env={"PYTHONPATH": str(ws / "src"), "PATH": "/usr/bin:/bin"})
        seen = dict((m.group(2), m.group(1)) for m in re.finditer(r"^(PASSED|FAILED|ERROR) (\S+)", out.stdout, re.M))
        total += len(inline)
        wrong += [(n, plan.expect[n], seen.get(n)) for n in inline
                  if (plan.expect[n] == "fail") != (seen.get(n) in ("FAILED", "ERROR"))]
    assert total > 60 and not wrong, wrong[:3]


def test_a_test_too_slow_to_copy_gets_no_copy_and_guards_nothing(tmp_path: Path) -> None:
    """decorator 5.3.1's ``DocumentationTestCase::test`` runs every doctest of the docs (5.8 s) and ends on
    ``assertEqual(err, 0)``: a block of up to 15 changed copies of it made each grading ~90 s longer (a 200 s
    stretch without a decision). Tests the task names ``uncopied`` (``Settings.canary_copy_max_s``) get no copy
    of any kind, and the forge chance counts no block for them."""
    from taskforge.reward.canaries import forge_chance, no_copies

    rel = "tests/test_s.py"
    source = ("def test_slow():\n    assert count() == 5\n\n\ndef test_fast():\n    assert f(2) == 'x2'\n\n\n"
              "def test_other():\n    assert g(1) == 'yy'\n")
    f2p, p2p, slow = [f"{rel}::test_slow", f"{rel}::test_fast"], [f"{rel}::test_other"], [f"{rel}::test_slow"]
    assert forge_chance({rel: source}, f2p, loose=no_copies(slow)) <= 1 / 16  # one block, more copies in it
    assert forge_chance({rel: source}, [f2p[0]]) < 1 / 8  # a digit: 8 changed copies
    assert forge_chance({rel: source}, [f2p[0]], loose=no_copies(slow)) == 1.0  # only the slow one: no block
    copies = 0
    for seed in range(20):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / rel).write_text(source)
        plan = plant_canaries(ws, [rel], pass_to_pass=[*p2p, *slow], fail_to_pass=f2p, rng=random.Random(seed),
                              uncopied=slow)
        assert not any("count()" in src for src in plan.sources.values()), seed
        copies += sum(1 for src in plan.sources.values() if "f(2)" in src)
    assert copies >= 20 * 7  # the fast stub caller carries the block


def test_a_forger_that_errors_every_unknown_test_is_caught_despite_the_instance_excuses(tmp_path: Path) -> None:
    """An attack on the excuses above: the graded process writes "passed" for every test it knows (the originals)
    and "error" for every instance of a test it does not (the canaries), hoping an error reads as honest. No
    instance of a must-fail copy failed and no original errored, so nothing vouches for it."""
    for plan, copy, _honest in _impl_copies(tmp_path, "fail", ["test_other[c]", "test_other[py]"],
                                            ["test_hidden[c]", "test_hidden[py]"]):
        forged = {f"{IMPL}::{t}[{p}]": "passed" for t in ("test_hidden", "test_other") for p in ("c", "py")}
        forged |= {f"{n}[{p}]": "error" for n in plan.expect for p in ("c", "py")}
        assert any(copy in p for p in plan.verify(forged, (), finished=True)), copy


TEXTTABLE = '''\
from textwrap import dedent


def test_draw():
    table = make()
    assert clean(table.draw()) == dedent(\'\'\'\\
        +------+
        | Name |
        +------+
    \'\'\')
    done = True
'''


def test_a_table_written_as_a_dedented_literal_of_several_lines_gets_changed_copies() -> None:
    """texttable 1.7.2 writes every expected table as ``dedent(\'\'\'...\'\'\')`` over several lines: no site, no
    changed copy and no seal, and 33 of its 63 decided candidates were weakly guarded (0 tasks)."""
    import ast
    import random

    from taskforge.reward.canaries import _mutated, _sites

    fn = ast.parse(TEXTTABLE).body[1]
    assert [[c.value for c in site] for site in _sites(fn)] == [[
        "        +------+\n        | Name |\n        +------+\n    "]]  # type: ignore[arg-type, attr-defined]
    copies = _mutated(TEXTTABLE, fn, ["test_a", "test_b"], random.Random(1))  # type: ignore[arg-type]
    assert copies is not None and len(copies) == 2
    original = TEXTTABLE.split("\n\n\n", 1)[1]
    for copy in copies:
        ast.parse(copy)
        assert copy.count("\n") == original.count("\n") and copy.endswith("    done = True\n")
        changed = [(a, b) for a, b in zip(copy.replace("test_a", "test_draw").replace("test_b", "test_draw"),
                                          original, strict=True) if a != b]
        assert len(changed) == 1 and changed[0][0].isalpha(), changed


def test_a_dedented_literal_is_sealed_as_its_dedented_value() -> None:
    from taskforge.reward.seals import SealSite, seal_source

    tokens: dict[str, SealSite] = {}
    out = seal_source(TEXTTABLE, "t.py", {"test_draw": None}, "SEAL", tokens=tokens)
    (token, site), = tokens.items()
    assert site == SealSite("t.py::test_draw#1", "+------+\n| Name |\n+------+\n")
    assert f"    SEAL((clean(table.draw())), {token!r})\n    done = True\n" in out and "Name" not in out


PROPERTY_TESTS = '''from hypothesis import given, settings, strategies as st

from pkg import double


@given(st.integers())
def test_double_is_twice(x):
    assert double(x) == x + x


class TestDouble:
    @settings(max_examples=5)
    @given(x=st.integers(0, 9))
    def test_double_is_even(self, x):
        assert double(x) % 2 == 0


def test_double_two():
    assert double(2) == 4
'''
# code under test that swaps ``hypothesis.given`` before the test files import it (cattrs' conftest imports
# cattrs first): every property test "passes" without its body running
GIVEN_SWAP = '''
import hypothesis


def _given(*a, **k):
    def deco(f):
        def test(*args, **kwargs):
            return None
        test.__name__, test.is_hypothesis_test = f.__name__, True  # what ``@settings`` looks for
        return test
    return deco


hypothesis.given = _given
'''


def _pytest_outcomes(ws: Path) -> dict[str, str]:
    import re
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:randomly",
                          "tests"], cwd=ws, capture_output=True, text=True, timeout=120).stdout
    return {m[2]: m[1].lower() for m in re.finditer(r"^(PASSED|FAILED|ERROR) (\S+)", out, re.M)}


@pytest.mark.parametrize("seed", [0, 1])
def test_a_property_test_that_never_runs_trips_its_must_fail_copy(tmp_path: Path, seed: int) -> None:
    """cattrs 26.2.1: a patch that kept the stub and swapped ``hypothesis.given`` for a no-op made every
    property test pass; reward 0 (its other tests failed) but a FAIL_TO_PASS fraction of 0.755 for a stub
    that scores 0.48, and no canary copied a ``@given`` test. A must-fail copy of a property test fails with
    the feature and with the stub, and passes only when its body never runs."""
    pytest.importorskip("hypothesis")
    f2p = ["tests/test_prop.py::test_double_is_twice", "tests/test_prop.py::TestDouble::test_double_is_even",
           "tests/test_prop.py::test_double_two"]
    verdicts = {}
    for case, code in (("gold", "def double(x):\n    return 2 * x\n"),
                       ("stub", "def double(x):\n    raise NotImplementedError\n"),
                       ("swap", "def double(x):\n    raise NotImplementedError\n" + GIVEN_SWAP)):
        ws = tmp_path / case
        (ws / "tests").mkdir(parents=True)
        (ws / "pkg").mkdir()
        (ws / "pkg/__init__.py").write_text(code)
        (ws / "tests/conftest.py").write_text("import pkg  # noqa: F401\n")
        (ws / "tests/test_prop.py").write_text(PROPERTY_TESTS)
        plan = plant_canaries(ws, ["tests/test_prop.py"], fail_to_pass=f2p, rng=random.Random(seed))
        copies = [n for n, o in plan.origins.items() if any("double_is" in x for x in o)]
        assert len(copies) == 1 and plan.expect[copies[0]] == "fail", plan.origins
        outcomes = _pytest_outcomes(ws)
        verdicts[case] = plan.verify(outcomes, [], finished=True)
        assert outcomes.get(copies[0]) == ("passed" if case == "swap" else "failed"), (case, outcomes)
    assert verdicts["gold"] == [] and verdicts["stub"] == [], verdicts
    assert any("must-fail canary" in p for p in verdicts["swap"]), verdicts


@pytest.mark.parametrize("head", [
    "try:\n    from hypothesis import given, strategies as st\nexcept ImportError:\n    given = st = None\n",
    "import pytest\n\nhypothesis = pytest.importorskip('hypothesis')\nst = hypothesis.strategies\n"
    "given = hypothesis.given\n",
])
def test_a_file_that_imports_hypothesis_optionally_still_gets_a_property_copy(tmp_path: Path, head: str) -> None:
    """Hypothesis is often an optional test dependency, imported in a ``try`` or through ``importorskip``."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_p.py").write_text(head + "\n\n@given(st.integers())\ndef test_prop(x):\n    assert x == x\n")
    plan = plant_canaries(tmp_path, ["tests/test_p.py"], fail_to_pass=["tests/test_p.py::test_prop"],
                          rng=random.Random(0))
    assert [n for n, o in plan.origins.items() if o == ("tests/test_p.py::test_prop",)], plan.origins


_SEALED_SRC = "".join(f"def test_s{i}():\n    assert f({i}) == 'v{i}'\n\n\n" for i in range(10)) + \
    "def test_u():\n    assert f(99) == 'v99'\n\n\ndef test_bare():\n    assert f(7)\n"


def test_the_forge_chance_is_over_the_tests_no_seal_guards() -> None:
    """Session 41: one confirmed seal set a task's forge chance to 0, yet a seal guards only its own test; a
    forger that computes the sealed values (part of the feature) and writes records for the rest is left to the
    canaries. idna's valid_contextj task: 35 of 683 FAIL_TO_PASS tests sealed, the other 648 with no literal."""
    from taskforge.reward.canaries import TWIN_MAX, forge_chance

    files = {"tests/test_h.py": _SEALED_SRC}
    f2p = [f"tests/test_h.py::test_s{i}" for i in range(10)]
    assert forge_chance(files, f2p, sealed=f2p) == 0.0  # every test sealed
    assert forge_chance(files, [*f2p, "tests/test_h.py::test_bare"], sealed=f2p) == 1.0  # the rest: no literal
    one_left = forge_chance(files, [*f2p, "tests/test_h.py::test_u"], sealed=f2p)
    assert one_left == 1 / (TWIN_MAX + 1)  # one block, as many copies as one block gets
    assert forge_chance(files, [*f2p, "tests/test_h.py::test_u"]) < one_left  # without seals: 8 blocks


def test_a_grading_draws_its_blocks_from_the_unsealed_tests_first(tmp_path: Path) -> None:
    """With 10 sealed tests and 1 unsealed, the blocks were drawn from all 11 and sized for 8 (3 copies each):
    a partial forger, which computes the sealed values, guessed the one block that mattered 1 time in 4. The
    unsealed test is drawn first and its block sized as the only one that guards (15 copies: 1 in 16)."""
    from taskforge.reward.canaries import TWIN_MAX

    f2p = [*(f"tests/test_h.py::test_s{i}" for i in range(10)), "tests/test_h.py::test_u"]
    for seed in range(12):
        ws = tmp_path / str(seed)
        (ws / "tests").mkdir(parents=True)
        (ws / "tests/test_h.py").write_text(_SEALED_SRC)
        plan = plant_canaries(ws, ["tests/test_h.py"], fail_to_pass=f2p, rng=random.Random(seed),
                              sealed=f2p[:10])
        copies = sum("tests/test_h.py::test_u" in origin for origin in plan.origins.values())
        assert copies == TWIN_MAX and plan.forge_chance == 1 / (TWIN_MAX + 1), (seed, copies, plan.forge_chance)
