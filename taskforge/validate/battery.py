"""The cheating battery: cheap stand-ins for the deleted code, graded against the hidden tests.

``stand_in_patches``: per stand-in of ``STAND_INS``, a patch against the broken workspace whose post-image is
the gold one with the body of every deleted function or method (a class: its methods; a module: its
functions and methods) replaced by the stand-in's, every other byte kept. Generators stay generators
(an unreachable ``yield``; value stand-ins become ``return``), ``__init__`` returns None for the value
stand-ins. ``run_battery`` grades each once, as an agent's patch is graded, and records them all.
"""

from __future__ import annotations

import functools
import re
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

import libcst as cst

from generators import cst_metrics
from generators.static_index import is_test_file
from taskforge.core.errors import TaskforgeError
from taskforge.core.patches import apply, diff, read_tree, split_files, write_tree
from taskforge.core.task import Task

_ANYTHING = '''
class _TfAnything:
    """Equal to everything, truthy, empty; each attribute, call and item of it is itself."""
    __slots__ = ()
    __eq__ = __le__ = __ge__ = __contains__ = __bool__ = lambda self, *a: True
    __ne__ = __lt__ = __gt__ = __exit__ = lambda self, *a: False
    __hash__ = __len__ = __int__ = __index__ = lambda self: 0
    __float__ = lambda self: 0.0
    __iter__ = lambda self: iter(())
    __str__ = __repr__ = __format__ = lambda self, *a: ""
    __call__ = __getitem__ = __enter__ = __neg__ = __pos__ = __add__ = __radd__ = lambda self, *a, **k: self
    __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __add__
    __setitem__ = __delitem__ = lambda self, *a: None
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self
'''

_ORACLE = '''
import ast as _tf_ast
import linecache as _tf_linecache
import re as _tf_re
import sys as _tf_sys

def _tf_sides(stmt):  # (a, b) of ``assert a == b``/``a is b``/``eq(a, b)``, ``self.assertEqual(a, b)``
    test, call = getattr(stmt, "test", None), getattr(stmt, "value", None)
    if isinstance(stmt, _tf_ast.Assert) and isinstance(test, _tf_ast.Compare) and len(test.ops) == 1 \\
            and isinstance(test.ops[0], (_tf_ast.Eq, _tf_ast.Is)):
        return test.left, test.comparators[0]
    if isinstance(stmt, _tf_ast.Assert) and isinstance(test, _tf_ast.Call) and len(test.args) == 2:
        return test.args[0], test.args[1]  # an equality helper (a grader's strict ``==`` too)
    if isinstance(stmt, _tf_ast.Expr) and isinstance(call, _tf_ast.Call) and len(call.args) >= 2 \\
            and getattr(call.func, "attr", "") in ("assertEqual", "assertEquals", "assertIs"):
        return call.args[0], call.args[1]
    return None

def _tf_expected(frame, code):
    file, line = frame.f_code.co_filename, frame.f_lineno
    try:  # the current line, else the innermost statement around it (an assert over several lines)
        sides = _tf_sides(_tf_ast.parse(_tf_linecache.getline(file, line).strip()).body[0])
    except (SyntaxError, IndexError):
        sides = None
    if sides is None:
        around = [n for n in _tf_ast.walk(_tf_ast.parse("".join(_tf_linecache.getlines(file))))
                  if isinstance(n, (_tf_ast.Assert, _tf_ast.Expr)) and n.lineno <= line <= n.end_lineno]
        sides = _tf_sides(max(around, key=lambda n: n.lineno)) if around else None
    names = {code.co_name} | {k for k, v in {**frame.f_globals, **frame.f_locals}.items()
                              if getattr(v, "__code__", None) is code}  # what the test calls it
    calls = [any(getattr(n, "id", getattr(n, "attr", None)) in names for n in _tf_ast.walk(s)) for s in sides or ()]
    if len(calls) != 2 or calls[0] == calls[1]:
        return _TfAnything()  # no comparison, or the feature on neither or both sides
    other = sides[1] if calls[0] else sides[0]
    return eval(compile(_tf_ast.Expression(other), file, "eval"), frame.f_globals, frame.f_locals)

_tf_code, _tf_frame = _tf_sys._getframe().f_code, _tf_sys._getframe().f_back
while _tf_frame is not None and not _tf_re.search(r"(^|/)(test_[^/]*|[^/]*_test|tests|conftest)\\.py$|/tests?/",
                                                  _tf_frame.f_code.co_filename):
    _tf_frame = _tf_frame.f_back
try:
    return _TfAnything() if _tf_frame is None else _tf_expected(_tf_frame, _tf_code)
except Exception:
    return _TfAnything()
'''

# name -> function body; ``__TF_FIRST__``: the first positional argument (self/cls skipped), read from the
# signature (no frame reading, so the patch monitor sees nothing but what the stand-in is)
STAND_INS: Mapping[str, str] = MappingProxyType({
    "always_equal": _ANYTHING + "return _TfAnything()\n",
    "none": "return None\n",
    "echo_first": "return __TF_FIRST__\n",
    "xfail": 'import pytest\npytest.xfail("wip")\n',
    "skip": 'import pytest\npytest.skip("wip")\n',
    "frame_oracle": _ANYTHING + _ORACLE,
})
RAISING = frozenset({"xfail", "skip"})  # stand-ins that never return


def stand_in_source(name: str, *, first: str = "None", init: bool = False, generator: bool = False) -> str:
    """The body pasted for stand-in ``name`` (dedented); ``first``: the expression of the first argument."""
    body = STAND_INS[name] if name in RAISING or not (init or generator) else "return None\n"
    if generator:
        body = ("return\n" if name not in RAISING else body) + "yield\n"
    return textwrap.dedent(body).lstrip("\n").replace("__TF_FIRST__", first)


@functools.lru_cache(maxsize=64)
def _statements(name: str, first: str, init: bool, generator: bool) -> tuple[cst.BaseStatement, ...]:
    return tuple(cst.parse_module(stand_in_source(name, first=first, init=init, generator=generator)).body)


def _first_argument(params: cst.Parameters, skip: int) -> str:
    """The first positional argument as an expression: a parameter, ``args[0]`` of ``*args``, else None."""
    positional = [p.name.value for p in (*params.posonly_params, *params.params)][skip:]
    if positional:
        return positional[0]
    star = params.star_arg.name.value if isinstance(params.star_arg, cst.Param) else ""
    return f"({star}[0] if {star} else None)" if star and not skip else "None"


class _YieldFinder(cst.CSTVisitor):
    found = False

    def visit_Yield(self, node: cst.Yield) -> None:
        self.found = True

    def _nested(self, node: cst.CSTNode) -> bool:
        return False  # nested scopes have yields of their own

    visit_FunctionDef = visit_ClassDef = visit_Lambda = _nested  # type: ignore[assignment]


class _StandIn(cst.CSTTransformer):
    """Replace the bodies of the functions ``targets`` selects (local qualnames; ``""`` = the module)."""

    def __init__(self, targets: frozenset[str], name: str) -> None:
        super().__init__()
        self.targets, self.name = targets, name
        self.scopes: list[tuple[str, bool]] = []  # (name, is a class)
        self.replaced: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.ClassDef, cst.FunctionDef)):
            self.scopes.append((node.name.value, isinstance(node, cst.ClassDef)))
        return super().on_visit(node)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.scopes.pop()
        return updated_node

    def _wanted(self) -> bool:
        """The function itself, or an enclosing class (only classes in between), or the module is a target."""
        names = [n for n, _ in self.scopes]
        for depth in range(len(names), -1, -1):
            if depth < len(names) and depth and not self.scopes[depth - 1][1]:
                return False  # a function inside a function is part of its owner's body
            if ".".join(names[:depth]) in self.targets:
                return True
        return False

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
                          ) -> cst.FunctionDef:
        wanted, in_class = self._wanted(), len(self.scopes) > 1 and self.scopes[-2][1]
        qual = ".".join(n for n, _ in self.scopes)
        self.scopes.pop()
        if not wanted:
            return updated_node
        static = any((cst.helpers.get_full_name_for_node(d.decorator) or "").endswith("staticmethod")
                     for d in original_node.decorators)
        finder = _YieldFinder()
        original_node.body.visit(finder)
        first = _first_argument(original_node.params, int(in_class and not static))
        stmts = _statements(self.name, first,
                            in_class and original_node.name.value == "__init__", finder.found)
        self.replaced.append(qual)
        body = original_node.body
        if not isinstance(body, cst.IndentedBlock):  # ``def f(): return 1``
            return original_node.with_changes(body=cst.IndentedBlock(body=list(stmts)))
        doc = cst_metrics.docstring_statement(body)
        return original_node.with_changes(body=body.with_changes(
            body=[*([doc] if doc else []), *stmts], footer=[ln for ln in body.footer if ln.comment is None]))


def file_targets(entities: Iterable[str], path: str) -> frozenset[str]:
    """Local qualnames in ``path`` of ``entities`` (``pkg.mod.Cls.f``, ``file.py:Cls.f``; ``""``: the module).

    A dotted name matches the longest dotted suffix of ``path`` it starts with (so src roots drop out).
    """
    parts = [p for p in Path(path).with_suffix("").parts if p != "__init__"]
    mods, out = [".".join(parts[i:]) for i in range(len(parts))], set()
    for e in entities:
        file, colon, local = e.rpartition(":")
        if colon:
            out.update([local] if file == path else [])
        else:
            out.update([e[len(m) + 1:] for m in mods if e == m or e.startswith(m + ".")][:1])
    return frozenset(out)


def transform(text: str, targets: frozenset[str], name: str) -> tuple[str, list[str]]:
    """``text`` with stand-in ``name`` in the selected bodies, and the local qualnames replaced."""
    editor = _StandIn(targets, name)
    return cst.parse_module(text).visit(editor).code, editor.replaced


def _sections(patch: str) -> dict[str, str]:
    """``{path: section}``, the path as ``git apply -p1`` reads it (``git diff -R`` swaps the a/ b/ prefixes)."""
    out = {}
    for _, chunk in split_files(patch):
        names = [n for n in re.findall(r"(?m)^(?:---|\+\+\+) (\S.*?)\t?$", chunk) if n != "/dev/null"]
        out[(names[-1] if names else chunk.split("\n", 1)[0].rsplit(" ", 1)[-1]).split("/", 1)[-1]] = chunk
    return out


def stand_in_patches(task: Task, original_tree: Path, names: Iterable[str] | None = None
                     ) -> tuple[dict[str, str], tuple[str, ...]]:
    """``({stand-in: patch against the broken workspace}, replaced "path::Local.qual")``.

    Only the files the gold patch touches are materialized (original, setup sections, gold). Raises
    ``PatchError`` when the patches do not apply, libcst's ``ParserSyntaxError`` for unparsable code.
    """
    paths = list(_sections(task.patch))
    with tempfile.TemporaryDirectory(prefix="tf-battery-") as tmp:
        write_tree({p: t for p, t in read_tree(Path(original_tree), paths).items() if t is not None}, Path(tmp))
        setup = _sections(task.setup_patch)
        apply("".join(setup[p] for p in paths if p in setup), Path(tmp), what=f"setup_patch of {task.instance_id}")
        broken = read_tree(Path(tmp), paths)
        apply(task.patch, Path(tmp), what=f"gold patch of {task.instance_id}")
        gold = read_tree(Path(tmp), paths)
    code = [p for p in paths if not is_test_file(p, task.env_spec)]
    patches, replaced = {}, []
    for name in names if names is not None else STAND_INS:
        after = dict(gold)
        for path in code:
            targets = file_targets(task.entities, path) if path.endswith(".py") and gold[path] else frozenset()
            if targets:
                after[path], quals = transform(gold[path] or "", targets, name)
                replaced += [f"{path}::{q}" for q in quals if f"{path}::{q}" not in replaced]
        patches[name] = diff(broken, after, code)
    return patches, tuple(replaced)


def stand_in_patch(task: Task, original_tree: Path, name: str) -> str:
    """The patch (against the broken workspace) that puts stand-in ``name`` in place of the feature."""
    return stand_in_patches(task, original_tree, [name])[0][name]


class Graded(Protocol):
    """What ``run_battery`` reads of a grading (``taskforge.reward.result.RewardResult`` has it)."""
    score: float
    outcomes: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class BatteryResult:
    fail_to_pass: tuple[str, ...]
    scores: Mapping[str, tuple[float, tuple[str, ...]]]  # stand-in -> (score, FAIL_TO_PASS it passed)
    replaced: tuple[str, ...] = ()  # "path::Local.qual" of every body stood in for
    seconds: Mapping[str, float] = field(default_factory=dict)  # stand-in -> grading seconds
    error: str = ""  # why no stand-in could be built (then nothing was graded)

    @property
    def covered(self) -> tuple[str, ...]:
        """FAIL_TO_PASS tests that some stand-in passes."""
        hit = {n for _, passed in self.scores.values() for n in passed}
        return tuple(n for n in self.fail_to_pass if n in hit)

    @property
    def cheats(self) -> tuple[str, ...]:
        return tuple(name for name, (score, _) in self.scores.items() if score > 0)

    @property
    def cheatable(self) -> bool:
        """A stand-in scores, or together they pass every hidden test (a dispatching fake could combine them)."""
        return bool(self.cheats) or (bool(self.fail_to_pass) and len(self.covered) == len(self.fail_to_pass))

    @property
    def detail(self) -> str:
        """One line for the funnel."""
        return (f"stand-in(s) {', '.join(self.cheats)} score above 0 on the hidden tests" if self.cheats
                else f"stand-ins together pass all {len(self.fail_to_pass)} hidden tests" if self.cheatable
                else self.error or f"no stand-in scores; {len(self.covered)}/{len(self.fail_to_pass)} fooled")

    def to_dict(self) -> dict[str, Any]:
        return {"fail_to_pass": list(self.fail_to_pass), "scores": {k: [s, list(p)] for k, (s, p) in self.scores.items()},
                "replaced": list(self.replaced), "seconds": dict(self.seconds), "error": self.error,
                "covered": list(self.covered), "cheatable": self.cheatable}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BatteryResult:
        return cls(tuple(d["fail_to_pass"]), {k: (float(s), tuple(p)) for k, (s, p) in d["scores"].items()},
                   tuple(d.get("replaced", ())), {k: float(v) for k, v in d.get("seconds", {}).items()},
                   str(d.get("error", "")))


MAX_WITNESS_REFRESHES = 2  # a stand-in passed the witness: look for another this many times, then grade whole


def run_battery(task: Task, original_tree: Path, grade: Callable[..., Graded],
                names: Iterable[str] | None = None, *, stop_when_cheatable: bool = False,
                deciding: Iterable[str] | None = None, first_failure: bool = False,
                record: Callable[[str, str, Graded], None] | None = None) -> BatteryResult:
    """Grade every stand-in (``grade(patch)`` calls, in ``names`` order) against ``task``'s hidden tests.

    None is skipped, unless ``stop_when_cheatable``: then grading stops as soon as the stand-ins graded so far
    among ``deciding`` (default: all) make the result ``cheatable``. That verdict is final: more gradings only
    add cheats and covered tests, so the rejection is the one grading them all gives.

    ``first_failure``: the scores are binary, so a task is cheatable exactly when the deciding stand-ins'
    passed tests together cover every hidden test; one hidden test that every deciding stand-in ran and did
    not pass proves it is not. The first deciding stand-in is graded with ``grade(patch,
    stop_at_failure=True)`` (pytest stops at its first failing test); the first hidden test it did not pass
    is the witness, and every other stand-in is graded with ``grade(patch, stop_after=witness)`` (it stops
    once the witness has run). Each such run is a prefix of the whole grading: the tests up to there ran
    exactly as they run in it. If every deciding stand-in fails the witness the battery ends: one short
    run per stand-in instead of a whole hidden-test run. When a stand-in passes the witness, a fresh one is
    looked for (``MAX_WITNESS_REFRESHES`` times): that stand-in graded up to its first failure among the
    hidden tests no stand-in has passed (``stop_at_failure_of``), each earlier deciding one up to that test.
    Failing that, every grading that left hidden tests unrun is redone whole, and the verdict is the one the
    whole gradings give. ``BatteryResult.covered``
    counts what the gradings that were kept passed.

    ``record(name, stop, graded)``, when given, is called after every grading (``stop``: "" for a whole
    grading, "first_failure" or "after_witness").

    When no body of the deleted entities can be stood in for (nothing matched, the code does not parse),
    nothing is graded (a stand-in patch would be the gold patch) and ``error`` says why.
    """
    names, f2p = list(names if names is not None else STAND_INS), tuple(task.fail_to_pass)
    decide = set(deciding if deciding is not None else names)
    try:
        patches, replaced = stand_in_patches(task, original_tree, names)
    except (TaskforgeError, cst.ParserSyntaxError) as exc:
        return BatteryResult(f2p, {}, error=f"cannot build the stand-ins: {type(exc).__name__}: {exc}"[:500])
    if not replaced:
        return BatteryResult(f2p, {}, error=f"no function or method of {list(task.entities)[:3]} to stand in for")
    scores: dict[str, tuple[float, tuple[str, ...]]] = {}
    seconds: dict[str, float] = {}
    partial: set[str] = set()  # stand-ins none of whose gradings ran every hidden test
    complete: set[str] = set()
    failed_by: dict[str, set[str]] = {}  # stand-in -> hidden tests one of its gradings ran and it did not pass

    def cheatable() -> bool:
        return BatteryResult(f2p, {k: v for k, v in scores.items() if k in decide}).cheatable

    def graded(name: str, stop: str = "", witness: str = "", among: tuple[str, ...] = ()) -> frozenset[str]:
        """Grade ``name`` (again: what its gradings passed adds up); the hidden tests it ran and did not pass."""
        start = time.monotonic()
        kw: dict[str, Any] = ({"stop_at_failure_of": among} if stop == "first_failure" and among
                              else {"stop_at_failure": True} if stop == "first_failure"
                              else {"stop_after": witness} if stop else {})
        res = grade(patches[name], **kw)
        seconds[name] = round(seconds.get(name, 0.0) + time.monotonic() - start, 3)
        before = scores.get(name, (0.0, ()))
        scores[name] = (max(before[0], float(res.score)),
                        tuple(n for n in f2p if res.outcomes.get(n) == "passed" or n in before[1]))
        if record is not None:
            record(name, stop, res)
        ran = {n: res.outcomes.get(n, "missing") for n in f2p}
        if all(o != "missing" for o in ran.values()):
            complete.add(name)
        partial.discard(name)
        if name not in complete:
            partial.add(name)
        failed = frozenset(n for n, o in ran.items() if o not in ("passed", "missing"))
        failed_by.setdefault(name, set()).update(failed)
        return failed

    def fresh_witness(name: str, before: list[str]) -> str:
        """A hidden test that ``name`` (which passed the witness) and every deciding stand-in graded before it
        fail, found with short runs: ``name`` up to its first failure among the tests no stand-in has passed,
        each earlier one up to that test. "" when there is none (or one of them passes it)."""
        open_ = tuple(n for n in f2p if not any(n in scores[o][1] for o in (*before, name) if o in scores))
        if not open_:
            return ""
        failed = graded(name, "first_failure", among=open_)
        new = next((n for n in open_ if n in failed), "")
        for other in before:
            if not new:
                break
            if new not in failed_by.get(other, set()):
                graded(other, "after_witness", new)
                if new in scores[other][1]:  # not run (the run ended before it) is not passed: see below
                    new = ""
        return new

    witness, held, refreshed = "", first_failure, 0
    deciders: list[str] = []  # the deciding stand-ins graded so far
    for name in names:
        if not held:  # whole gradings (the default, or no witness holds)
            graded(name)
        elif not witness and name in decide:
            failed = graded(name, "first_failure", among=f2p)
            witness = next((n for n in f2p if n in failed), "")
            held = bool(witness)
        elif witness:
            graded(name, "after_witness", witness)
            # a witness the run did not reach (it crashed, stopped or timed out first) is not passed: the run is
            # a prefix of the whole grading, which ends the same way (tenacity's xfail stand-in: every hidden
            # test missing; taken for a pass of the witness, it cost 5 whole gradings, 60 s of a 97 s gap)
            held = witness not in scores[name][1] or name not in decide
            if not held and refreshed < MAX_WITNESS_REFRESHES:
                # attrs' always_equal failed a test echo_first passed: every later stand-in was graded whole
                # (30-47 s each over 88 hypothesis tests) where a fresh witness takes a few short runs
                refreshed += 1
                witness = fresh_witness(name, deciders)
                held = bool(witness)
        else:  # a stand-in that decides nothing, before any deciding one: whole
            graded(name)
        if name in decide:
            deciders.append(name)
        if stop_when_cheatable and cheatable():
            return BatteryResult(f2p, scores, replaced, seconds)
    if held or not first_failure:
        return BatteryResult(f2p, scores, replaced, seconds)
    for name in names:  # no witness: the gradings that left tests unrun, whole
        if name in decide and name in partial:
            graded(name)
            if stop_when_cheatable and cheatable():
                break
    return BatteryResult(f2p, scores, replaced, seconds)


__all__ = ["RAISING", "STAND_INS", "BatteryResult", "Graded", "file_targets", "run_battery", "stand_in_patch",
           "stand_in_patches", "stand_in_source", "transform"]
