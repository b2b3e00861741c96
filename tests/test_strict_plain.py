"""The grading plugin's strict equality (``grading_plugin.strict_eq``) against lying ``__eq__`` methods.

Red team, session 40: a ``tuple`` subclass whose content was ``(False, None)`` and whose ``__eq__`` said True
to everything except the plugin's sentinel (recognised by its class name ``_Unseen`` and its ``_tfg...``
module) passed every equality assertion of itsdangerous' ``test_loads_unsafe``, and its sealed site recorded
the content. A subclass of a plain type now also has to be equal by its base type's content, and the
sentinel is a decoy shaped like the expected value. Each case runs the real plugin in a plain pytest run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from taskforge.reward.canaries import write_plugin

EQ = "_tfq0123456789"

LIB = '''
import collections
import enum


def _plugin_object(other):
    kind = type(other)
    return kind.__name__ == "_Unseen" or str(getattr(kind, "__module__", "")).startswith("_tfg")


class LyingTuple(tuple):
    def __eq__(self, other):
        return not _plugin_object(other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = tuple.__hash__


class LyingStr(str):
    __eq__ = LyingTuple.__eq__
    __ne__ = LyingTuple.__ne__
    __hash__ = str.__hash__


class LyingBytes(bytes):
    __eq__ = LyingTuple.__eq__
    __hash__ = bytes.__hash__


class Liar:
    __eq__ = LyingTuple.__eq__
    __hash__ = object.__hash__


class TruthyLiar:  # ``==`` answers 1: truthy, but not ``True``
    def __eq__(self, other):
        return 1

    __hash__ = object.__hash__


class Point:  # an honest workspace class with its own equality
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return tuple(other) == (self.x, self.y)

    __hash__ = object.__hash__


class Word(str):
    pass


class Level(enum.IntEnum):
    HIGH = 3


Pair = collections.namedtuple("Pair", "a b")
'''

TESTS = f'''
import collections

import lib


def test_lying_tuple():
    assert {EQ}(lib.LyingTuple((False, None)), (True, "value"))


def test_lying_tuple_reflected():
    assert {EQ}((True, "value"), lib.LyingTuple((False, None)))


def test_lying_tuple_in_a_list():
    assert {EQ}([lib.LyingTuple((False, None))], [(True, "value")])


def test_lying_str():
    assert {EQ}(lib.LyingStr("nothing"), "value")


def test_lying_bytes_in_a_dict():
    assert {EQ}({{"k": lib.LyingBytes(b"x")}}, {{"k": b"value"}})


def test_liar():
    assert {EQ}(lib.Liar(), (True, "value"))


def test_liar_against_a_string():
    assert {EQ}(lib.Liar(), "value")


def test_truthy_liar():
    assert {EQ}(lib.TruthyLiar(), "value")


def test_lying_tuple_with_the_right_content():  # equal by content, but it equals a decoy too
    assert {EQ}(lib.LyingTuple((True, "value")), (True, "value"))


def test_honest_point():
    assert {EQ}(lib.Point(1, 2), (1, 2))


def test_honest_plain_subclasses():
    assert {EQ}(lib.Word("abc"), "abc")
    assert {EQ}(lib.Level.HIGH, 3)
    assert {EQ}(lib.Pair(1, [2]), (1, [2]))
    assert {EQ}(collections.OrderedDict([("a", 1), ("b", 2)]), {{"b": 2, "a": 1}})
    assert {EQ}({{1.5, "x"}}, frozenset({{"x", 1.5}}))
    assert {EQ}(True, 1)
'''

LIARS = ["test_lying_tuple", "test_lying_tuple_reflected", "test_lying_tuple_in_a_list", "test_lying_str",
         "test_lying_bytes_in_a_dict", "test_liar", "test_liar_against_a_string", "test_truthy_liar",
         "test_lying_tuple_with_the_right_content"]
HONEST = ["test_honest_point", "test_honest_plain_subclasses"]


def test_strict_equality_refuses_lying_eq_methods_and_keeps_honest_values(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "lib.py").write_text(LIB)
    (ws / "test_strict.py").write_text(TESTS)
    module = write_plugin(ws, ".", [], EQ)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", module,
                          "-o", "addopts=", "test_strict.py"], cwd=ws, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ws), "PATH": "/usr/bin:/bin"})
    seen = {m.group(2).split("::")[-1]: m.group(1)
            for m in re.finditer(r"^(PASSED|FAILED|ERROR) (\S+)", out.stdout, re.M)}
    assert {n: seen.get(n) for n in LIARS} == dict.fromkeys(LIARS, "FAILED"), out.stdout[-3000:]
    assert {n: seen.get(n) for n in HONEST} == dict.fromkeys(HONEST, "PASSED"), out.stdout[-3000:]
