"""Sealed expectations: expected values a graded process never holds. Stdlib (and ``canaries``) only.

A forger that runs inside the graded process (the stub itself, a conftest, anything the patch imports) can
write the runner's records as it likes: "passed" for exactly the tests that ran the stub, say. The canaries
(``taskforge.reward.canaries``) make it guess which of several look-alike tests is the original; a forger
that reads the files guesses better than chance (``tests/redteam_hacks.py``, ``KNOWN_HOLES``). A sealed
assertion leaves it nothing to guess from.

At grading, a hidden FAIL_TO_PASS test's top-level ``assert got == LITERAL`` (either side; or
``self.assertEqual(got, LITERAL)``) becomes ``NAME(got, "TOKEN")``: the literal is gone from the workspace,
and ``NAME`` (installed by the grading plugin, ``grading_plugin.py``) writes what ``got`` is, as plain data
(``encode``; a subclass of str, int, list... as its base value, anything else as "opaque"), on the records
channel under the running test's id, and returns. Only the grader's process, outside the sandbox, knows
which literal each token stands for (``SealPlan``): it fails a test with a recorded value that is not equal
to its literal, and a test reported "passed" that did not record every sealed site it must have reached (the
grading is then flagged ``forged_results`` and ``tampering``: an honest run that passes a test records every
value on its way). A forger must now produce the value itself, which is the task.

Which sites a task seals is learnt once, at validation (``probe``): the gold patch's first grading carries
the literals too (``NAME(got, "TOKEN", LITERAL)``, which checks ``got == LITERAL`` in the process as the
strict equality does and records ``got``), and a site is sealed for a test only when every value the gold
code recorded there equals its literal (a ``numpy.int64``, a ``MultiDict`` compared with a dict literal: not
plain data, not sealed). ``SealPlan.confirmed`` gives those (test, site) pairs; the task keeps them
(``provenance["seals"]``) and every later grading seals exactly those sites.

A site is a statement at the top level of the test function's body (it runs exactly once in every run of the
test that passes), with no ``return`` above it, on lines of its own; its literal is what ``ast.literal_eval``
reads (strings, bytes, numbers, and lists, tuples, sets and dicts of them) or ``dedent('''...''')`` of a string
literal (``_dedented``), and not a weak value, one a stub can produce
without implementing anything (``_guessable``: None, a bool, 0 or 1, an empty value, a literal the test
wrote above it or passes in the call, also as bytes/text, int/text or list/tuple, and a container of such).
Only such strong sites are sealed, so a confirmed seal is a strong one. A seal guards its own test only: a
forger that computes the sealed values and writes records for the other tests is left to the canaries, so the
forge chance (``validate.steps``, ``canaries.forge_chance(sealed=...)``) is over the tests no seal guards, 0 only
when every FAIL_TO_PASS test is sealed, and the canaries' blocks are drawn from the unsealed tests first.
"""

from __future__ import annotations

import ast
import functools
import math
import re
import secrets
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from taskforge.core import pyparse
from taskforge.reward.canaries import own_nodes

# unittest's equality assertions, which compare with ``==`` (``numpy.testing.assert_equal`` does not: left out)
_EQ_CALLS = frozenset({"assertEqual", "assertEquals", "assertListEqual", "assertTupleEqual", "assertDictEqual",
                       "assertSetEqual", "assertMultiLineEqual"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
MAX_LITERAL = 100_000  # characters of a literal worth sealing (the record carries the value back)


@dataclass(frozen=True)
class SealSite:
    """One sealed assertion: where it is (``site``: ``file::unit#statement``) and the literal it compares with."""

    site: str
    expected: Any


@dataclass(frozen=True)
class SealPlan:
    """The sealed sites of one grading workspace (the grader's process only; never written in the workspace).

    ``sites``: token -> site; ``required``: node id -> the tokens its run must record (a test reported passed
    without one did not reach that assertion, or its records were withheld); ``probe``: the literals stayed
    in the process (validation's gold grading)."""

    sites: Mapping[str, SealSite] = field(default_factory=dict)
    required: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    probe: bool = False

    def judge(self, outcomes: Mapping[str, str],
              records: Iterable[tuple[str, str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
        """``outcomes`` with every test a sealed site refutes turned to ``failed``, and why (node id -> one line)."""
        out = dict(outcomes)
        seen: set[tuple[str, str]] = set()
        why: dict[str, str] = {}
        for nodeid, token, value in records:
            site = self.sites.get(token)
            if site is None:
                continue
            seen.add((nodeid, token))
            if not equal(decode(value), site.expected) and out.get(nodeid) in ("passed", "xpassed"):
                out[nodeid] = "failed"
                why[nodeid] = f"{nodeid}: the value at a sealed assertion is not the expected one"
        for nodeid in self.withheld(out, seen):
            out[nodeid] = "failed"
            why[nodeid] = f"{nodeid} reported passed without the value of its sealed assertion"
        return out, why

    def withheld(self, outcomes: Mapping[str, str], seen: set[tuple[str, str]]) -> list[str]:
        """Tests reported passed that recorded no value at a site they must reach: every top-level statement
        of a test that passes runs, and the gold probe saw this one record there, so only code of the run
        that writes the records (or withholds the value) explains it."""
        return [n for n, tokens in self.required.items()
                if outcomes.get(n) in ("passed", "xpassed") and any((n, t) not in seen for t in tokens)]

    def confirmed(self, outcomes: Mapping[str, str], records: Iterable[tuple[str, str, Any]],
                  tests: Iterable[str]) -> dict[str, list[str]]:
        """Node id -> the sites that ``tests`` (passed) recorded only values equal to their literals at; a site
        where any test recorded another value is left out everywhere (probe gradings of the gold patch)."""
        good: dict[str, set[str]] = {}
        bad: set[str] = set()
        for nodeid, token, value in records:
            site = self.sites.get(token)
            if site is None:
                continue
            if equal(decode(value), site.expected):
                good.setdefault(nodeid, set()).add(site.site)
            else:
                bad.add(site.site)
        return {n: sorted(good[n] - bad) for n in sorted(set(tests))
                if outcomes.get(n) == "passed" and good.get(n, set()) - bad}


class _Opaque:
    """A value the process could not write as plain data: equal to nothing."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


def decode(value: Any, depth: int = 0) -> Any:
    """The plain value ``grading_plugin``'s ``encode`` wrote (anything malformed: a value equal to nothing)."""
    try:
        if value is None:
            return None
        if depth > 40 or not isinstance(value, list) or not value:
            return _Opaque()
        tag = value[0]
        if tag == "T":
            return True
        if tag == "F":
            return False
        arg = value[1]
        if tag == "s" and isinstance(arg, str):
            return arg
        if tag == "i" and isinstance(arg, str):
            return int(arg)
        if tag == "f" and isinstance(arg, str):
            return float(arg)
        if tag == "c" and isinstance(arg, str):
            return complex(arg)
        if tag == "y" and isinstance(arg, str):
            return bytes.fromhex(arg)
        if tag in ("l", "t", "e") and isinstance(arg, list):
            items = [decode(v, depth + 1) for v in arg]
            return items if tag == "l" else tuple(items) if tag == "t" else set(items)
        if tag == "d" and isinstance(arg, list):
            return {decode(k, depth + 1): decode(v, depth + 1) for k, v in arg}
    except (ValueError, TypeError, IndexError, OverflowError):
        pass
    return _Opaque()


def equal(got: Any, expected: Any) -> bool:
    """``got == expected`` between plain values (never raises)."""
    try:
        return bool(got == expected)
    except Exception:  # noqa: BLE001 - an unhashable or odd decoded value is not the expected one
        return False


def units(tree: ast.Module) -> dict[str, tuple[ast.FunctionDef, str]]:
    """Test functions by node-id tail (``test_x``, ``TestCls::test_x``, ``Outer::Inner::test_x``), each with the
    tail of where it is defined: a test class of this file inherits the test methods of its bases defined in
    this file (cachetools' ``CacheWrapperTest(DecoratorTestMixin, ...)``: ``CacheWrapperTest::test_decorator``
    runs ``DecoratorTestMixin::test_decorator``), first base first, as the MRO finds them."""
    out: dict[str, tuple[ast.FunctionDef, str]] = {}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def methods(cls: ast.ClassDef, seen: frozenset[str]) -> dict[str, tuple[ast.FunctionDef, str]]:
        own: dict[str, tuple[ast.FunctionDef, str]] = {}
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else ""
            if name in classes and name not in seen:
                for k, v in methods(classes[name], seen | {name}).items():
                    own.setdefault(k, v)
        for n in cls.body:
            if isinstance(n, _FUNCS) and n.name.startswith("test"):
                own[n.name] = (n, f"{cls.name}::{n.name}")  # type: ignore[assignment]
        return own

    def walk(body: list[ast.stmt], prefix: str, top: bool) -> None:
        for n in body:
            if isinstance(n, _FUNCS) and n.name.startswith("test"):
                out[prefix + n.name] = (n, prefix + n.name)  # type: ignore[assignment]
            elif isinstance(n, ast.ClassDef):
                if top:
                    for name, (fn, home) in methods(n, frozenset({n.name})).items():
                        out[f"{n.name}::{name}"] = (fn, home)
                    walk([c for c in n.body if isinstance(c, ast.ClassDef)], f"{n.name}::", False)
                else:
                    walk(n.body, f"{prefix}{n.name}::", False)

    walk(tree.body, "", True)
    return out


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex)
    if isinstance(node, ast.Constant):
        return type(node.value) in (str, bytes, int, float, complex, bool, type(None))
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return all(_literal(e) for e in node.elts) and not any(isinstance(e, ast.Starred) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k) and _literal(v) for k, v in zip(node.keys, node.values, strict=True))
    return False


def _dedented(node: ast.AST) -> str | None:
    """The value of ``dedent('''...''')`` (``textwrap.dedent``, or a helper named so: texttable's ``u_dedent``)
    of a string literal; None for anything else. Text-table and CLI tests write their expected output so."""
    if not isinstance(node, ast.Call) or len(node.args) != 1 or node.keywords:
        return None
    func, arg = node.func, node.args[0]
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if not name.endswith("dedent") or not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
        return None
    return textwrap.dedent(arg.value)


def _expected_value(node: ast.expr, text: str) -> Any:
    """What the expected side ``node`` (source ``text``) is: a literal, or a dedented string literal."""
    dedented = _dedented(node)
    return dedented if dedented is not None else pyparse.literal_eval(text)


def _computed(node: ast.AST) -> bool:
    """A side the run computes: it names something (a literal expected value needs none)."""
    return any(isinstance(n, ast.Name | ast.Attribute | ast.Call) for n in ast.walk(node))


def _sides(stmt: ast.stmt) -> tuple[ast.expr, ast.expr] | None:
    """(got, expected) of ``assert got == LITERAL``/``assert LITERAL == got``/``self.assertEqual(got, LITERAL)``."""
    pair: tuple[ast.expr, ast.expr] | None = None
    if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1 \
            and isinstance(stmt.test.ops[0], ast.Eq):
        pair = (stmt.test.left, stmt.test.comparators[0])
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and len(stmt.value.args) in (2, 3) \
            and all(k.arg == "msg" for k in stmt.value.keywords):
        func = stmt.value.func
        if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in _EQ_CALLS:
            pair = (stmt.value.args[0], stmt.value.args[1])
    if pair is None:
        return None
    for got, expected in (pair, pair[::-1]):
        if (_literal(expected) or _dedented(expected) is not None) and _computed(got) and _dedented(got) is None:
            return got, expected
    return None


def sites(source: str, tree: ast.Module, wanted: Iterable[str]) -> list[tuple[str, ast.stmt, ast.expr, ast.expr]]:
    """(site id tail ``unit#index``, statement, got, expected) of every sealable assertion of the ``wanted`` units."""
    lines = source.splitlines()
    segment = pyparse.source_segments(source)
    found = []
    table = units(tree)
    homes: dict[str, ast.FunctionDef] = {}  # where each wanted test is defined: an inherited one, once
    for key in sorted(set(wanted)):
        if key in table:
            homes.setdefault(table[key][1], table[key][0])
    for key, fn in sorted(homes.items()):
        if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in own_nodes(fn.body)):
            continue
        body = fn.body
        for index, stmt in enumerate(body):
            if any(isinstance(n, ast.Return) for n in own_nodes(body[:index])):  # a helper's return: no matter
                break
            sides = _sides(stmt)
            if sides is None:
                continue
            end = stmt.end_lineno or stmt.lineno
            alone = (index == 0 or (body[index - 1].end_lineno or 0) < stmt.lineno) \
                and (index + 1 == len(body) or body[index + 1].lineno > end) \
                and not lines[stmt.lineno - 1].encode("utf-8")[:stmt.col_offset].strip() \
                and stmt.lineno > fn.lineno
            text = segment(sides[1]) or ""
            if not alone or len(text) > MAX_LITERAL:
                continue
            try:
                value = _expected_value(sides[1], text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, float) and not math.isfinite(value):
                continue
            if _guessable(value, [*fn.decorator_list, fn.args, *body[:index], sides[0]]):
                continue
            found.append((f"{key}#{index}", stmt, sides[0], sides[1]))
    return found


def _guessable(value: Any, scope: list[ast.AST]) -> bool:
    """A WEAK value: one code that implements nothing can produce. Such a site is not sealed: its literal
    stays, and the canaries plant their changed copies around it (``canaries._twins``), which a sealed site
    would not get; a task whose sealable sites are all weak has no seal, so validation holds it to
    ``Settings.max_forge_chance`` like any unsealed task (``validate.steps``).

    The rule: ``value`` is weak when it is

    - a constant a stub returns: None, a bool, 0 or 1, an empty string, bytes or collection;
    - an input of the test, after normalising (``_shape``: bytes read as UTF-8 text, an int as its decimal
      text, a list as a tuple): a literal of the test's decorators, parameters' defaults, statements above
      the assertion, or the call under test itself (an echo: ``assert "plurals" == pluralize("plurals")``;
      ``assert s.unsign(s.sign("value")) == b"value"``, the input converted str -> bytes);
    - a tuple, list, set or dict built only of such values (``loads_unsafe(bad) == (False, None)``).

    Red team, session 31: a stub that read the expected value off the test's frame, else echoed its argument,
    scored 1.0 on inflection's pluralize task when its two sealed assertions were ``"" == pluralize("")`` and
    ``"plurals" == pluralize("plurals")``. Session 40: fakes of itsdangerous' signers that check nothing
    produced every sealed value of two tasks (``b"value"`` for ``sign("value")``, ``(False, None)``), and a
    records forger passed the rest (1.0, no flag)."""
    inputs: set[Any] = set()
    for root in scope:
        for node in ast.walk(root):
            if isinstance(node, ast.Constant) or (isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict
                                                                | ast.UnaryOp) and _literal(node)):
                try:
                    inputs.add(_shape(pyparse.literal_eval(node)))
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
    return _weak(value, inputs, 0)


def _weak(value: Any, inputs: set[Any], depth: int) -> bool:
    if value is None or isinstance(value, bool) or (type(value) in (int, float) and value in (0, 1)):
        return True
    if isinstance(value, str | bytes | list | tuple | dict | set | frozenset) and not value:
        return True
    try:
        if _shape(value) in inputs:
            return True
    except (TypeError, ValueError):
        pass
    if depth > 20:
        return False
    if isinstance(value, list | tuple | set | frozenset):
        return all(_weak(v, inputs, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_weak(k, inputs, depth + 1) and _weak(v, inputs, depth + 1) for k, v in value.items())
    return False


def _shape(value: Any) -> Any:
    """``value`` up to the conversions a stub gets for free (hashable): bytes as the UTF-8 text they are, an
    int as its decimal text, a list or tuple as a tuple, a set as a frozenset, a dict as its items."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return str(int(value))  # a ValueError past the int -> str digit limit: no match
    if isinstance(value, list | tuple):
        return ("seq", tuple(_shape(v) for v in value))
    if isinstance(value, set | frozenset):
        return ("set", frozenset(_shape(v) for v in value))
    if isinstance(value, dict):
        return ("map", frozenset((_shape(k), _shape(v)) for k, v in value.items()))
    return value


def seal_source(source: str, rel: str, wanted: Mapping[str, Iterable[str] | None], name: str, *,
                probe: bool = False, tokens: dict[str, SealSite] | None = None,
                transform: Callable[[str], str] | None = None) -> str:
    """``source`` (the hidden test file ``rel``) with the sealable assertions of ``wanted`` rewritten.

    ``wanted``: unit key -> the site ids (``rel::unit#index``) to seal, or None for every sealable one (a
    probe). Each sealed site gets a fresh token, recorded in ``tokens``. Unparsable: unchanged.

    ``transform`` (the strict-equality rewrite) is applied to the sealed text before its tokens and ``name``
    are filled in: the text it sees is the same in every grading of the file, so a cached transform is not
    redone (libcst takes 17 s on idna's 1.4 MB test file; every grading used to pay it, fresh tokens made
    every text new)."""
    key = tuple(sorted((unit, None if ids is None else tuple(sorted(ids))) for unit, ids in wanted.items()))
    finish = transform or (lambda text: text)
    if _SLOT_MARK in source:  # slots could not be told from the file's own text: fresh tokens, no cache
        text, slots = _sealed(source, rel, key, probe, lambda _i: secrets.token_hex(6), name)
        found = dict(slots)
        text = finish(text)
    else:
        text, slots = _slotted(source, rel, key, probe)
        fresh = {slot: secrets.token_hex(6) for slot, _ in slots}
        text = _SLOT.sub(lambda m: repr(fresh[m.group(0)[1:-1]]) if m.group(0) != _NAME_SLOT else name,
                         finish(text))
        found = {fresh[slot]: site for slot, site in slots}
    if tokens is not None:
        tokens.update(found)
    return text


_SLOT_MARK = "__tfseal"
_NAME_SLOT = f"{_SLOT_MARK}_name__"
_SLOT = re.compile(rf"'{_SLOT_MARK}\d{{6}}__'|{_NAME_SLOT}")


@functools.lru_cache(maxsize=16)
def _slotted(source: str, rel: str, wanted: tuple[tuple[str, tuple[str, ...] | None], ...],
             probe: bool) -> tuple[str, tuple[tuple[str, SealSite], ...]]:
    """The sealed text with a slot for each token (``'__tfseal000000__'``) and for the name, and what each
    slot stands for; the same for every grading of one task, so it (and what is built from it) is cached."""
    return _sealed(source, rel, wanted, probe, lambda i: f"{_SLOT_MARK}{i:06d}__", _NAME_SLOT)


def _sealed(source: str, rel: str, wanted: tuple[tuple[str, tuple[str, ...] | None], ...], probe: bool,
            token_of: Callable[[int], str], name: str) -> tuple[str, tuple[tuple[str, SealSite], ...]]:
    try:
        tree = pyparse.parse(source)
    except (SyntaxError, ValueError):
        return source, ()
    units = dict(wanted)
    lines = source.splitlines(keepends=True)
    segment = pyparse.source_segments(source)
    edits = []
    slots: list[tuple[str, SealSite]] = []
    for tail, stmt, got, expected in sites(source, tree, units):
        site = f"{rel}::{tail}"
        allowed = units.get(tail.split("#", 1)[0])
        if allowed is not None and site not in set(allowed):
            continue
        got_text = segment(got)
        expected_text = segment(expected)
        if got_text is None or expected_text is None:
            continue
        token = token_of(len(slots))
        indent = lines[stmt.lineno - 1].encode("utf-8")[:stmt.col_offset].decode("utf-8")
        extra = f", ({expected_text})" if probe else ""
        call = f"{indent}{name}(({got_text}), {token!r}{extra})\n"
        edits.append((stmt.lineno, stmt.end_lineno or stmt.lineno, call))
        slots.append((token, SealSite(site, _expected_value(expected, expected_text))))
    for first, last, text in sorted(edits, reverse=True):
        lines[first - 1:last] = [text]
    return "".join(lines), tuple(slots)


def plan_for(files: Mapping[str, str], fail_to_pass: Iterable[str], seals: Mapping[str, Iterable[str]] | None,
             name: str, *, probe: bool = False,
             transform: Callable[[str], str] | None = None) -> tuple[dict[str, str], SealPlan]:
    """The sealed texts of the hidden test ``files`` (path -> text) and the plan that judges them; ``transform``
    (see ``seal_source``) is applied to the sealed files only.

    ``probe``: seal every sealable site of every FAIL_TO_PASS test, literals kept in the process (validation);
    otherwise ``seals`` (node id -> site ids: ``provenance["seals"]``) names the sites, and the tests that
    must record them."""
    f2p = list(dict.fromkeys(fail_to_pass))
    wanted: dict[str, dict[str, set[str] | None]] = {}
    if probe:
        for nodeid in f2p:
            rel, _, rest = nodeid.partition("::")
            wanted.setdefault(rel, {})[rest.split("[", 1)[0]] = None
    else:
        for site_ids in (seals or {}).values():
            for site in site_ids:
                rel, _, tail = str(site).partition("::")
                unit = tail.split("#", 1)[0]
                bucket = wanted.setdefault(rel, {}).setdefault(unit, set())
                if bucket is not None:
                    bucket.add(str(site))
    tokens: dict[str, SealSite] = {}
    texts: dict[str, str] = {}
    for rel, units_wanted in wanted.items():
        if rel in files:
            count = len(tokens)
            text = seal_source(files[rel], rel, units_wanted, name, probe=probe, tokens=tokens, transform=transform)
            if len(tokens) > count:  # a file with no site sealed is left to the caller
                texts[rel] = text
    by_site: dict[str, list[str]] = {}
    for token, sealed in tokens.items():
        by_site.setdefault(sealed.site, []).append(token)
    # a site the task names that its file no longer has seals nothing and is required of no test
    required = {} if probe else {str(n): need for n, site_ids in (seals or {}).items()
                                 if (need := tuple(t for s in site_ids for t in by_site.get(str(s), ())))}
    return texts, SealPlan(tokens, required, probe)


__all__ = ["SealPlan", "SealSite", "decode", "equal", "plan_for", "seal_source", "sites", "units"]
