"""Tamper-evidence plugin of a grading run. Standalone: stdlib + pytest, no taskforge.

``taskforge.reward.canaries.write_plugin`` copies this file into the grading workspace under a random
module name, with ``_CONFIG`` replaced by the grading's settings (the strict equality's name and the
project's own plugin files: **no canary**, nothing about which tests are canaries or what they must do),
and the runner loads it with ``-p NAME``: pytest imports ``-p`` plugins before setuptools plugins,
conftests and test modules, and the runner puts the request's ``-p`` options before the ``-p`` options of
the environment's plugins (a project that is itself a pytest plugin is one of those), so this code runs
before any code of the patch under grading. On import it
deletes its own file.

The canaries are ordinary tests that produce their own outcome; only the grader's process, outside the
sandbox, knows them (``taskforge.reward.canaries``). This plugin checks the integrity of the run before
every test function runs, and once it finds tampering it fails every test from then on (so the must-pass
canaries fail and the grader sees it). Tampering is:

- pytest, pluggy, json, sitecustomize or usercustomize imported from the workspace;
- a watched pytest internal (runner, reports, python, skipping, pluggy's hook calling) replaced, or its
  code object swapped;
- a hook implementation registered before collection removed or altered, or a new one whose code lives
  in the workspace outside a ``conftest.py`` (the grader restored every conftest from the original);
- a test reported "passed" in its call phase although its test function raised or never ran;
- a profile or trace function (``sys``/``threading`` ``setprofile``/``settrace``) active while a test runs
  (grading runs measure no coverage: nothing honest traces a test), or a test function's ``__code__``
  swapped between collection and its call;
- the plugin manager's per-instance ``_inner_hookexec``/``_hookexec`` or a hook caller's ``_hookexec``
  replaced (snapshotted when this plugin registers, before any conftest or project code runs).

The check itself runs with warnings ignored: a project's ``filterwarnings = error`` cannot turn a warning
of the check into a failed test.
"""

from __future__ import annotations

_CONFIG = "__TASKFORGE_GRADING_CONFIG__"


def _build() -> dict:  # type: ignore[type-arg]
    import json
    import os
    import sys

    import _pytest.main
    import _pytest.python
    import _pytest.reports
    import _pytest.runner
    import _pytest.skipping
    import pluggy
    import pytest

    cfg = json.loads(globals().pop("_CONFIG"))
    try:
        os.unlink(__file__)
    except OSError:
        pass
    allowed_files = {os.path.realpath(p) for p in cfg.get("allowed_plugin_files", [])}
    workspace = os.path.realpath(os.getcwd())
    problems: list[str] = []

    def inside(path: str) -> bool:
        real = os.path.realpath(path)
        return real == workspace or real.startswith(workspace + os.sep)

    for name in ("pytest", "_pytest", "pluggy", "json", "sitecustomize", "usercustomize"):
        filename = getattr(sys.modules.get(name), "__file__", None)
        if filename and inside(filename):
            problems.append(f"{name} was imported from the workspace ({filename})")

    watched = [
        (_pytest.runner, "call_and_report"), (_pytest.runner, "runtestprotocol"),
        (_pytest.runner, "call_runtest_hook"), (_pytest.runner, "pytest_runtest_makereport"),
        (_pytest.runner, "CallInfo.from_call"), (_pytest.runner, "check_interactive_exception"),
        (_pytest.reports, "TestReport.from_item_and_call"), (_pytest.reports, "TestReport.__init__"),
        (_pytest.reports, "BaseReport.passed"), (_pytest.python, "pytest_pyfunc_call"),
        (_pytest.python, "Function.runtest"), (_pytest.skipping, "pytest_runtest_makereport"),
        (_pytest.main, "pytest_runtestloop"), (pluggy.HookCaller, "__call__"),
        (pluggy.PluginManager, "_hookexec"), (pytest, "main"),
    ]

    def resolve(obj: object, qual: str) -> object:
        for part in qual.split("."):
            obj = obj.__dict__[part] if isinstance(obj, type) and part in obj.__dict__ else getattr(obj, part)
        return obj

    def fingerprint(fn: object) -> tuple[object, ...]:
        inner = getattr(fn, "fget", None) or getattr(fn, "__func__", None) or fn
        return (fn, inner, getattr(inner, "__code__", None))

    import threading
    import warnings

    pm_snap: dict[str, object] = {}
    code_snap: dict[str, object] = {}

    import builtins
    import unittest

    class _Unseen:  # a value no honest object has ever been compared with
        __slots__ = ()

    honest_types = (int, float, complex, str, bytes, bool, type(None))

    def suspect(value: object, depth: int = 0) -> bool:
        """An instance of a workspace class that equals a fresh sentinel (or holds one, shallowly)."""
        kind = type(value)
        if kind in honest_types or depth > 3:
            return False
        if kind in (list, tuple, set, frozenset):
            return any(suspect(v, depth + 1) for v in list(value)[:1000])  # type: ignore[call-overload]
        if kind is dict:
            return any(suspect(k, depth + 1) or suspect(v, depth + 1)
                       for k, v in list(value.items())[:1000])  # type: ignore[attr-defined]
        module = sys.modules.get(getattr(kind, "__module__", "") or "")
        if not inside(getattr(module, "__file__", None) or "/"):
            return False
        try:
            return bool(value == _Unseen())
        except Exception:
            return False

    def strict_eq(left: object, right: object, own: int = 0) -> object:
        # ``own``: which side the (restored) test file built from its own class (1 left, 2 right): not checked
        result = left == right
        if result is True and ((own != 1 and suspect(left)) or (own != 2 and suspect(right))):
            return False
        return result

    eq_name = str(cfg.get("strict_eq", ""))
    if eq_name:
        setattr(builtins, eq_name, strict_eq)

    # sealed assertions (``taskforge.reward.seals``): ``NAME(got, token)`` writes ``got`` as plain data on the
    # records channel under the running test's id; the grader, outside, knows the literal it must equal
    runner = sys.modules.get("__main__")
    if not callable(getattr(runner, "send", None)):
        runner = next((m for m in list(sys.modules.values())
                       if callable(getattr(m, "send", None)) and callable(getattr(m, "open_channel", None))), None)
    send_record = getattr(runner, "send", None)
    running = [""]  # the node id of the test whose call phase runs

    def encode(value: object, depth: int = 0, budget: list[int] | None = None) -> object:
        budget = budget if budget is not None else [200_000]
        budget[0] -= 1
        if depth > 40 or budget[0] < 0:
            return ["?", "too large"]
        if value is None:
            return None
        if value is True or value is False:
            return ["T"] if value else ["F"]
        # a subclass of a plain type as its base value, read with the base type's own methods (no code of the
        # subclass runs): ``str.__str__`` of a str subclass is a plain copy, ``int.__repr__`` of an IntEnum
        try:
            if isinstance(value, int):
                return ["i", int.__repr__(value)]
            if isinstance(value, float):
                return ["f", float.__repr__(value)]
            if isinstance(value, complex):
                return ["c", complex.__repr__(value)]
            if isinstance(value, str):
                return ["s", str.__str__(value)]
            if isinstance(value, bytes):
                return ["y", bytes.hex(value)]
            if isinstance(value, bytearray):
                return ["y", bytearray.hex(value)]
            if isinstance(value, tuple):
                return ["t", [encode(v, depth + 1, budget) for v in tuple.__iter__(value)]]
            if isinstance(value, list):
                return ["l", [encode(v, depth + 1, budget) for v in list.__iter__(value)]]
            if isinstance(value, frozenset):
                return ["e", [encode(v, depth + 1, budget) for v in frozenset.__iter__(value)]]
            if isinstance(value, set):
                return ["e", [encode(v, depth + 1, budget) for v in set.__iter__(value)]]
            if isinstance(value, dict):
                return ["d", [[encode(k, depth + 1, budget), encode(v, depth + 1, budget)]
                              for k, v in dict.items(value)]]
        except (ValueError, TypeError, RecursionError):
            return ["?", "unreadable"]
        return ["?", type(value).__name__]

    def seal(got: object, token: str, *expected: object) -> None:
        if send_record is not None:
            send_record({"k": "seal", "id": running[0], "t": str(token), "v": encode(got)})
        if expected and not strict_eq(got, expected[0]):  # a probe (validation's gold grading): as ``assert``
            raise AssertionError(f"sealed assertion: the value differs from {expected[0]!r}")

    seal_name = str(cfg.get("seal", ""))
    if seal_name:
        setattr(builtins, seal_name, seal)
    plain_assert_equal = unittest.TestCase.assertEqual

    def assert_equal(self: unittest.TestCase, first: object, second: object, msg: object = None) -> None:
        plain_assert_equal(self, first, second, msg)
        if suspect(first) or suspect(second):
            raise self.failureException(msg or "an object that equals anything is not a value")

    unittest.TestCase.assertEqual = assert_equal  # type: ignore[method-assign]
    unittest.TestCase.assertEquals = assert_equal  # type: ignore[attr-defined]

    def tracing() -> list[str]:
        out = []
        if sys.getprofile() is not None or sys.gettrace() is not None:
            out.append("a profile or trace function is active during the test")
        if getattr(threading, "_profile_hook", None) is not None or getattr(threading, "_trace_hook", None) is not None:
            out.append("a threading profile or trace hook is installed")
        return out

    snap: dict[tuple[int, str], tuple[object, ...]] = {}
    for owner, qual in watched:
        try:
            snap[(id(owner), qual)] = fingerprint(resolve(owner, qual))
        except (AttributeError, KeyError):
            continue
    owners = {id(o): o for o, _ in watched}
    hook_snap: dict[str, list[tuple[object, object]]] = {}
    call_seen: dict[str, str] = {}  # nodeid -> "ok" | "raised"
    logged_pass: set[str] = set()

    def impl_key(impl: object) -> tuple[object, object]:
        fn = getattr(impl, "function", None)
        return (fn, getattr(fn, "__code__", None))

    def integrity(session: object) -> list[str]:
        bad = list(problems) + tracing()
        if eq_name and getattr(builtins, eq_name, None) is not strict_eq:
            bad.append("the strict equality of the hidden tests was replaced")
        if seal_name and getattr(builtins, seal_name, None) is not seal:
            bad.append("the sealed assertion of the hidden tests was replaced")
        if unittest.TestCase.__dict__.get("assertEqual") is not assert_equal:
            bad.append("unittest.TestCase.assertEqual was replaced")
        pm = session.config.pluginmanager  # type: ignore[attr-defined]
        if pm_snap and (getattr(pm, "_inner_hookexec", None) is not pm_snap["_inner_hookexec"]
                        or vars(pm).get("_hookexec") is not pm_snap["_hookexec"]):
            bad.append("the plugin manager's hook execution was replaced")
        for name, fn in pm_snap.items():
            if name.startswith("hook:"):
                caller = getattr(pm.hook, name[5:], None)
                if caller is not None and getattr(caller, "_hookexec", None) is not fn:
                    bad.append(f"hook {name[5:]}'s _hookexec was replaced")
        for (oid, qual), fp in snap.items():
            try:
                now = fingerprint(resolve(owners[oid], qual))
            except (AttributeError, KeyError):
                now = ()
            if now != fp:
                bad.append(f"{qual} was replaced")
        hook = session.config.hook  # type: ignore[attr-defined]
        for name, before in hook_snap.items():
            impls = getattr(hook, name).get_hookimpls()
            now_keys = [impl_key(i) for i in impls]
            for key in before:
                if key not in now_keys:
                    bad.append(f"a {name} implementation was removed or altered")
            for key in now_keys:
                if key in before:
                    continue
                code = key[1]
                filename = getattr(code, "co_filename", "") or ""
                if (filename and inside(filename) and os.path.basename(filename) != "conftest.py"
                        and os.path.realpath(filename) not in allowed_files):
                    bad.append(f"{name} hook registered from {filename}")
        for nodeid in logged_pass:
            if call_seen.get(nodeid) != "ok":
                bad.append(f"{nodeid} reported passed but its test function did not run cleanly")
        return bad

    def pytest_addhooks(pluginmanager: object) -> None:  # called as this plugin registers: before conftests
        pm_snap["_inner_hookexec"] = getattr(pluginmanager, "_inner_hookexec", None)
        pm_snap["_hookexec"] = vars(pluginmanager).get("_hookexec")  # a method: absent from the instance
        for name in ("pytest_runtest_protocol", "pytest_runtest_makereport", "pytest_runtest_call",
                     "pytest_pyfunc_call", "pytest_runtest_logreport", "pytest_report_teststatus"):
            caller = getattr(pluginmanager.hook, name, None)  # type: ignore[attr-defined]
            if caller is not None and getattr(caller, "_hookexec", None) is not None:
                pm_snap[f"hook:{name}"] = caller._hookexec

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_collection(session: object):  # type: ignore[no-untyped-def]
        hook = session.config.hook  # type: ignore[attr-defined]
        for name in ("pytest_runtest_protocol", "pytest_runtest_makereport", "pytest_runtest_call",
                     "pytest_pyfunc_call", "pytest_runtest_logreport", "pytest_report_teststatus",
                     "pytest_runtestloop", "pytest_collection_modifyitems", "pytest_runtest_setup"):
            hook_snap[name] = [impl_key(i) for i in getattr(hook, name).get_hookimpls()]
        yield

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(session: object, config: object, items: list) -> None:  # type: ignore[type-arg]
        for item in items:
            fn = getattr(item, "function", None)
            if fn is not None:
                code_snap[item.nodeid] = getattr(fn, "__code__", None)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(item: object):  # type: ignore[no-untyped-def]
        nodeid = item.nodeid  # type: ignore[attr-defined]
        fn = getattr(item, "function", None)
        if nodeid in code_snap and getattr(fn, "__code__", None) is not code_snap[nodeid]:
            problems.append(f"the code of {nodeid} was swapped before it ran")
        problems.extend(f"{p} ({nodeid})" for p in tracing() if f"{p} ({nodeid})" not in problems)
        running[0] = nodeid
        try:
            outcome = yield
        finally:
            running[0] = ""
        call_seen[item.nodeid] = "raised" if outcome.excinfo is not None else "ok"  # type: ignore[attr-defined]

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(pyfuncitem: object) -> object:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bad = integrity(pyfuncitem.session)  # type: ignore[attr-defined]
        if bad:
            raise AssertionError("grading integrity: " + "; ".join(bad[:5]))
        return None  # pytest's own implementation runs the test

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(report: object) -> None:
        if report.when == "call" and report.outcome == "passed":  # type: ignore[attr-defined]
            logged_pass.add(report.nodeid)  # type: ignore[attr-defined]

    return {"pytest_addhooks": pytest_addhooks, "pytest_collection": pytest_collection,
            "pytest_collection_modifyitems": pytest_collection_modifyitems,
            "pytest_runtest_call": pytest_runtest_call, "pytest_pyfunc_call": pytest_pyfunc_call,
            "pytest_runtest_logreport": pytest_runtest_logreport}


globals().update(_build())
del _build
