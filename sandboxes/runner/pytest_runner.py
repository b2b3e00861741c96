"""In-sandbox test runner: run pytest, stream one record per test phase to the parent, write coverage.

Standalone on purpose: stdlib + pytest (+ coverage.py when coverage is asked for). It never imports
taskforge, because it is copied into sandboxes (virtualenvs, containers) where taskforge is absent.

    python pytest_runner.py REQUEST.json

**The parent is the authority on outcomes** (``sandboxes/ledger.py`` reads the records). Before pytest or
any code of the workspace is imported, the runner takes its channel: ``channel_fd`` (an inherited fd; when
it is 1 or 2, the runner keeps a private duplicate and points fds 1 and 2 at ``log_path``) or
``channel_path`` (a file, for trusted backends). Every record is one JSON line, written with one
``write``: ``hello``, ``collect_error``, ``collected`` (collect-only runs), ``phase`` (one per test
phase: node id, setup/call/teardown, outcome, xfail, duration), ``shadow`` (refused, see below),
``dupes`` (tests deselected because several collected items share their node id: ``DuplicateIds``),
``preloaded`` (the workspace files imported before pytest loads its conftests: by pytest itself when the
project is one of its dependencies; ``preloaded_files``) and ``end`` last. The parent keeps the first record of each test phase, treats a second one, a foreign line
or anything after ``end`` as forged, and a run without ``end`` as a run that never finished.

Also before anything of the workspace runs:
- ``sys.path``: the workspace's source roots go *after* site-packages (``PYTHONPATH`` put them first);
- plugins: ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``, and the ``pytest11`` plugins of distributions installed
  in the environment (never one found in the workspace) are loaded explicitly with ``-p``, after the
  request's own ``-p`` options (the grading plugin first, as plain pytest imports ``-p`` before autoload). Once this
  session is configured the variable is restored to what it was (``RestoreAutoload``), so a pytest the
  tests start themselves (``pytester``, a subprocess) loads plugins as a plain pytest would: pytest-mock's
  own tests run ``mocker`` in an inner session;
- ``shadow_allowed`` (grading runs): a top-level module or package in a source root or the workspace root
  that the original tree did not have and that has the name of a stdlib module or of a module installed
  in the environment refuses the run (a ``shadow`` record, exit 4);
- ``grading``: ``PYTEST_CURRENT_TEST`` is never set (a stub could read the running test from it);
- the loopback interface is brought up when the run is in a network namespace of its own whose ``lo`` is
  down (``unshare -rn`` leaves it down; bubblewrap and docker bring it up): a test that talks to a server
  it started on ``127.0.0.1`` (boltons' socketutils) passes in every sandbox as in plain pytest. Nothing
  outside the namespace becomes reachable.

REQUEST.json keys (unknown keys are ignored):
    args             list[str]  pytest arguments (node ids, paths, options)
    channel_fd       int        the records channel (an inherited file descriptor), or
    channel_path     str        the records channel as a file (appended)
    log_path         str        where fds 1 and 2 go when the channel is one of them
    src_roots        list[str]  the workspace's source roots (absolute), moved after site-packages
    coverage         bool       measure per-test line coverage (coverage.py, one context per test)
    coverage_source  list[str]  files/dirs whose lines are measured (relative to the cwd or absolute)
    coverage_omit    list[str]  files under them that are not measured (absolute; optional)
    coverage_json    str        where to write ``{relative file: {line: [node ids]}}`` (test function ids in a
                                large parametrized suite: ``ReportPlugin``); the Python child processes a
                                test starts are measured too, under that test's id (``SubprocessCoverage``)
    collect_only     bool       only collect: the collected node ids are sent as ``collected`` records
    tracebacks       bool       false: ``--tb=no``, and no failure's traceback is formatted (``BriefFailures``;
                                the caller reads outcomes only); true: the first ``FULL_TRACEBACKS`` failures
                                are formatted, the rest brief (idna 3.20: 6,403 formatted unittest failures
                                took a grading of a stub past its 718 s limit; brief, 141 s)
    stop_at_failure  bool       ``--maxfail=1``: stop after the first failing test (the tests run up to it
                                ran exactly as in a whole run; the rest are absent)
    stop_after       str        a node id: stop once that test has run (``StopAfter``); absent: run all
    stop_at_failure_of list     node ids: stop once one of them has failed (``StopAtFailureOf``)
    test_deadline_s  float      > 0: a test still running after this many seconds fails (``TestDeadline``);
                                for our own stand-ins at validation, which can make the code loop
    test_deadlines   dict       node id -> seconds: that test's own deadline, instead of ``test_deadline_s``
    shadow_allowed   list[str]  top-level names the workspace may define (grading runs; see above)
    grading          bool       a grading run (see above)

The runner always adds ``-p no:cacheprovider -p no:randomly --continue-on-collection-errors`` (a test
file that cannot be collected is sent as ``collect_error``; the other files still run), and
``--benchmark-disable`` when pytest-benchmark is installed and no ``--benchmark-*`` option is given:
outcomes are all that is read, and timing rounds cost wcwidth 2.5 s for each of its 50 benchmark tests.
Hypothesis tests run derandomized, without an example database or shrinking, with
``HYPOTHESIS_MAX_EXAMPLES`` examples each (``HypothesisBudget``).
The exit code of this script is pytest's exit code (4 when the request itself is unusable).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterable
from typing import Any

SUBTEST_REPORTS = frozenset({"SubtestReport", "SubTestReport"})  # pytest>=9 built-in, pytest-subtests
HYPOTHESIS_MAX_EXAMPLES = 20  # examples of each property test in every run (``HypothesisBudget``)
_CHANNEL_FD = -1  # the private duplicate of the records channel, set by ``open_channel``


def open_channel(request: dict[str, Any]) -> int:
    """Take the records channel before anything else runs; returns its (private) fd."""
    global _CHANNEL_FD
    if request.get("channel_fd") is not None:
        fd = os.dup(int(request["channel_fd"]))
        if int(request["channel_fd"]) in (1, 2):
            log = os.open(request.get("log_path") or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
    else:
        fd = os.open(request["channel_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    _CHANNEL_FD = fd
    return fd


def send(record: dict[str, Any]) -> None:
    """One record, one line, one ``write`` (records under PIPE_BUF never interleave with others)."""
    data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    while data:
        try:
            n = os.write(_CHANNEL_FD, data)
        except InterruptedError:
            continue
        except OSError:
            return  # the parent is gone: nothing left to tell
        data = data[n:]


COLLECTION_CONTEXT = "<collection>"  # taskforge.profile.coverage_map.COLLECTION_CONTEXT: lines run collecting
GROUP_MIN_TESTS = 5000  # coverage contexts per test function, not per instance, from this many tests ...
GROUP_MIN_RATIO = 4  # ... when they are this many instances per function on average


def function_id(nodeid: str) -> str:
    """The node id without its parametrization: ``t.py::test_f[a-1]`` -> ``t.py::test_f``."""
    head, sep, tail = nodeid.rpartition("::")
    return head + sep + tail.split("[", 1)[0]


class ReportPlugin:
    """Sends one ``phase`` record per test phase (and collection errors); switches coverage contexts.

    A coverage context is named by the test's node id, or, in a suite of at least ``GROUP_MIN_TESTS`` tests
    with ``GROUP_MIN_RATIO`` parametrized instances per function, by its function's id (``function_id``):
    packaging's 64,204 tests are 1,190 functions, and one context per instance made its coverage run cost
    3x a plain run and write 572 MB of JSON. The parent maps a function's context back to its instances.
    """

    def __init__(self, cov: Any = None, collect_only: bool = False, packages: Iterable[str] = (),
                 sender: Any = None) -> None:
        # the records channel as ``main`` found it, before any graded code ran: code that rebinds this module's
        # ``send`` (``__main__.send``, red team session 40) changes no record, and the grading plugin flags the
        # rebinding (``integrity``). This only raises the bar: code in this process can still reach this
        # object, or write to the channel's fd itself (``KNOWN_HOLES`` in tests/redteam_hacks.py).
        self.send = send if sender is None else sender
        self.cov = cov
        self.collect_only = collect_only
        self.grouped = False
        self.packages = tuple(packages)
        self.context = ""  # the coverage context now

    def switch(self, context: str) -> None:
        if self.cov is not None:
            self.context = context
            self.cov.switch_context(context)
            SubprocessCoverage.context(context)

    def test_context(self, nodeid: str) -> str:
        return function_id(nodeid) if self.grouped else nodeid

    # --- coverage contexts: one per test (or test function), named by its id ---------------------
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.switch(self.test_context(nodeid))

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.switch("")

    def pytest_load_initial_conftests(self, early_config: Any, parser: Any, args: Any) -> None:
        self.send({"k": "preloaded", "files": preloaded_files()})

    # --- coverage outside the tests: the package's import (""), then the collection of the tests ---------------
    def pytest_collection(self, session: Any) -> None:
        """Import the measured packages while the context is still "" (what runs when the package is imported, a
        stub of which breaks every test), then measure the collection (test modules' own module-level code,
        ``pytest_generate_tests``, parametrize lists) apart: a stub of what only that runs breaks the test files
        that run it, not the package (parso's test module calling ``parse()`` at module level)."""
        if self.cov is None:
            return
        import importlib

        for name in self.packages:
            try:
                importlib.import_module(name)
            except BaseException:  # the collection reports it, as a plain run does
                pass
        self.switch(COLLECTION_CONTEXT)

    # --- records ----------------------------------------------------------------------------------
    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.send({"k": "collect_error", "id": report.nodeid or "<session>"})

    def pytest_collection_finish(self, session: Any) -> None:
        self.switch("")
        if self.cov is not None and len(session.items) >= GROUP_MIN_TESTS:
            functions = {function_id(item.nodeid) for item in session.items}
            self.grouped = len(session.items) >= GROUP_MIN_RATIO * len(functions)
        unordered = unordered_ids(session.items)
        for i in range(0, len(unordered), 50):
            self.send({"k": "unordered", "ids": unordered[i:i + 50]})
        if self.collect_only:
            ids = [item.nodeid for item in session.items]
            for i in range(0, len(ids), 50):
                self.send({"k": "collected", "ids": ids[i:i + 50]})

    def pytest_runtest_logreport(self, report: Any) -> None:
        rec = {"k": "phase", "id": report.nodeid, "when": report.when, "outcome": report.outcome,
               "xfail": hasattr(report, "wasxfail"), "dur": round(float(getattr(report, "duration", 0.0) or 0.0), 6)}
        if type(report).__name__ in SUBTEST_REPORTS:  # unittest subTest / ``subtests``: one per sub-case
            rec["sub"] = 1
        self.send(rec)


def unordered_ids(items: list[Any]) -> list[str]:
    """Tests parametrized over a ``set``: pytest numbers a value it cannot render by its position
    (``expected23``), and a set's order can change between processes (a member holding ``None`` hashes by
    address). Such an id may name another case in the next run, whatever the baseline runs happened to see."""
    out = []
    for item in items:
        if getattr(item, "callspec", None) is None:
            continue
        for mark in item.iter_markers("parametrize"):
            values = mark.args[1] if len(mark.args) > 1 else mark.kwargs.get("argvalues")
            if isinstance(values, (set, frozenset)):
                out.append(item.nodeid)
                break
    return out


def preloaded_files(limit: int = 2000) -> list[str]:
    """Workspace files (relative to the cwd) of the modules imported so far, sorted; at most ``limit``."""
    root = os.path.realpath(os.getcwd()) + os.sep
    found: set[str] = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            real = os.path.realpath(path)
            if real.startswith(root):
                found.add(real[len(root):].replace(os.sep, "/"))
    return sorted(found)[:limit]


SUBCOV_ENV = "TASKFORGE_SUBCOV"  # {"dir": ..., "include": [...]}: where children write their coverage data
SUBCOV_CONTEXT_ENV = "TASKFORGE_SUBCOV_CONTEXT"  # the running test's coverage context, inherited by its children
class SharedSetup:
    """Coverage of a fixture wider than one test (module, class, package or session scope; unittest's
    ``setUpClass`` and xunit's ``setup_module`` are such fixtures) counts for every test that uses that instance,
    not only for the test whose setup happened to create it. ecdsa's ``setUpClass`` builds the keys every test
    of its class uses, multidict's module fixture the classes, mako's module-level lookup compiles templates:
    deleting what they run failed tests that coverage tied to nothing of it (a red PASS_TO_PASS test, the
    candidate rejected ``suite_red_after_deletion``).

    While such a fixture's own function runs, the context is ``<setup:N>``; a test that has the fixture among
    its ``fixturenames`` while instance N is live is a user of it; ``_coverage_write`` replaces ``<setup:N>``
    by its users (at least the test whose setup created it). Only in coverage runs."""

    def __init__(self, report: ReportPlugin) -> None:
        self.report = report
        self.live: dict[str, str] = {}  # fixture name -> the context of its live wide instance
        self.users: dict[str, set[str]] = {}  # "<setup:N>" -> the test contexts that used it

    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Any:  # a hookwrapper (``main``)
        if getattr(fixturedef, "scope", "function") == "function":
            yield
            return
        key = f"<setup:{len(self.users)}>"
        before = self.report.context
        self.users[key] = {before} if before not in ("", COLLECTION_CONTEXT) else set()
        self.report.switch(key)
        try:
            yield
        finally:
            self.report.switch(before)
        name = fixturedef.argname
        self.live[name] = key
        try:
            fixturedef.addfinalizer(lambda: self.live.pop(name) if self.live.get(name) == key else None)
        except Exception:  # an old pytest without it: the instance counts as live until replaced
            pass

    def pytest_runtest_call(self, item: Any) -> None:
        context = self.report.test_context(item.nodeid)
        for name in getattr(item, "fixturenames", ()):
            key = self.live.get(name)
            if key is not None:
                self.users[key].add(context)

    def expand(self, contexts: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for c in contexts:
            out.update(self.users.get(c, ()) if c.startswith("<setup:") else (c,))
        return out


SITECUSTOMIZE = '''"""taskforge's per-test coverage of a test's Python child processes (pytest_runner.SubprocessCoverage)."""
import os


def _taskforge_subcov():
    import atexit
    import json

    context = os.environ.get("TASKFORGE_SUBCOV_CONTEXT")
    try:
        cfg = json.loads(os.environ["TASKFORGE_SUBCOV"])
        if not context:
            return
        import coverage

        cov = coverage.Coverage(data_file=os.path.join(cfg["dir"], "cov.%d" % os.getpid()), include=cfg["include"],
                                config_file=False, branch=False, context=context)
        cov._warn = lambda *args, **kwargs: None  # a child's stderr is what its test reads (jsonpointer's CLI tests)
        cov.start()
    except Exception:
        return

    def save():
        try:
            cov.stop()
            cov.save()
        except Exception:
            pass

    atexit.register(save)


_taskforge_subcov()
del _taskforge_subcov
# the sitecustomize this one shadows (a distribution's), if any, run under another name (the import of this
# one returns ``sys.modules["sitecustomize"]``: it must stay this module)
def _taskforge_chain():
    import importlib.util
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        path = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.abspath(entry or ".") != here and os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_taskforge_shadowed_sitecustomize", path)
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                sys.modules[spec.name] = module
                spec.loader.exec_module(module)
            return


try:
    _taskforge_chain()
except Exception:
    pass
del _taskforge_chain
'''


class SubprocessCoverage:
    """Per-test coverage of the Python child processes a test starts (``[sys.executable, '-m', 'pkg']``, a
    console script): a ``sitecustomize`` on the children's ``PYTHONPATH`` starts coverage.py in each one,
    under the running test's context (an environment variable the runner sets at each test's start), and
    ``_coverage_write`` merges what they saved. Without it, jsonpointer's CLI tests covered nothing, and
    deleting what the CLI runs was rejected as a red PASS_TO_PASS test (``generators.cli_tests`` guesses
    only ``-m pkg`` and script paths, statically). Only in coverage runs, on the pristine code."""

    def __init__(self, include: list[str]) -> None:
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="tf-subcov-")
        with open(os.path.join(self.dir, "sitecustomize.py"), "w", encoding="utf-8") as fh:
            fh.write(SITECUSTOMIZE)
        self.config = json.dumps({"dir": self.dir, "include": include})
        os.environ.update(self.child_env(os.environ))
        self._patch_popen()

    def child_env(self, env: Any) -> dict[str, str]:
        """``env`` with the variables a child needs to measure itself (our folder first on its PYTHONPATH)."""
        out = dict(env)
        path = str(out.get("PYTHONPATH") or "")
        if self.dir not in path.split(os.pathsep):
            out["PYTHONPATH"] = os.pathsep.join(p for p in (self.dir, path) if p)
        out[SUBCOV_ENV] = self.config
        out[SUBCOV_CONTEXT_ENV] = os.environ.get(SUBCOV_CONTEXT_ENV, "")
        return out

    def _patch_popen(self) -> None:
        """A child given its own environment (jsonpointer's CLI tests: ``env=dict(os.environ, PYTHONPATH=root)``)
        still gets the variables: ``Popen._execute_child``'s ``env`` argument (the 7th) is completed."""
        import subprocess

        original = getattr(subprocess.Popen, "_execute_child", None)
        if original is None or os.name != "posix":
            return
        child_env = self.child_env

        def _execute_child(popen: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                if "env" in kwargs and kwargs["env"] is not None:
                    kwargs["env"] = child_env(kwargs["env"])
                elif len(args) > 6 and isinstance(args[6], dict):
                    args = (*args[:6], child_env(args[6]), *args[7:])
            except Exception:  # an environment of bytes, or an odd mapping: the child goes unmeasured
                pass
            return original(popen, *args, **kwargs)

        subprocess.Popen._execute_child = _execute_child  # type: ignore[attr-defined]

    @staticmethod
    def context(name: str) -> None:
        os.environ[SUBCOV_CONTEXT_ENV] = name

    def data(self) -> list[Any]:
        """The coverage data the children saved (one ``CoverageData`` per process that exited normally)."""
        import coverage

        out = []
        for name in sorted(os.listdir(self.dir)):
            if name.startswith("cov."):
                data = coverage.CoverageData(basename=os.path.join(self.dir, name))
                try:
                    data.read()
                except Exception:  # a child killed while saving
                    continue
                out.append(data)
        return out


def package_names(paths: Iterable[str]) -> list[str]:
    """The importable names of the measured packages and modules (``coverage_source``: package directories
    and module files; a directory that is no package, like the whole workspace, names nothing)."""
    names = []
    for path in paths:
        path = os.path.abspath(path)
        base = os.path.basename(path)
        if os.path.isfile(os.path.join(path, "__init__.py")) and base.isidentifier():
            names.append(base)
        elif base.endswith(".py") and os.path.isfile(path) and base[:-3].isidentifier():
            names.append(base[:-3])
    return names


def omitted(paths: Iterable[str]) -> list[str]:
    """``coverage_omit`` as coverage.py's omit patterns: each file's absolute path, matched exactly. A path
    with a glob character (``*?[]``) is left out (it would match other files, or not parse): that file is
    measured, which costs time and changes no answer."""
    return [os.path.abspath(p) for p in paths if not any(c in p for c in "*?[]")]


def _coverage_start(request: dict[str, Any]) -> Any:
    import coverage  # only needed when coverage is asked for

    include = []
    for src in request.get("coverage_source") or ["."]:
        path = os.path.abspath(src)
        include.append(os.path.join(path, "*") if os.path.isdir(path) else path)
    cov = coverage.Coverage(data_file=None, include=include, omit=omitted(request.get("coverage_omit") or ()),
                            config_file=False, branch=False)
    # children measure everything included: the omitted files would travel in an environment variable (a
    # single one is limited to 128 KiB), and what children run is little of a suite
    cov.subprocesses = SubprocessCoverage(include)  # type: ignore[attr-defined]
    cov.start()
    return cov


def _coverage_write(cov: Any, path: str, shared: SharedSetup | None = None) -> None:
    cov.stop()
    cwd = os.getcwd()
    merged: dict[str, dict[int, set[str]]] = {}
    children = getattr(cov, "subprocesses", None)
    for data in [cov.get_data(), *(children.data() if children is not None else ())]:
        for filename in data.measured_files():
            lines = merged.setdefault(os.path.relpath(filename, cwd), {})
            for ln, ctxs in data.contexts_by_lineno(filename).items():
                lines.setdefault(ln, set()).update(ctxs)
    out: dict[str, dict[str, list[str]]] = {}
    for rel, by_line in sorted(merged.items()):
        # "" is the context outside every test and its collection: the imports of conftests and of the package,
        # session hooks (a stub of what runs there breaks every test); COLLECTION_CONTEXT the collection (a stub
        # breaks the test files that run it); the parent keeps both apart from the tests
        if shared is not None:
            by_line = {ln: shared.expand(ctxs) for ln, ctxs in by_line.items()}
        contexts = {str(ln): sorted(ctxs) for ln, ctxs in sorted(by_line.items()) if ctxs}
        if contexts:
            out[rel] = contexts
    _write_json(path, out)
    if children is not None:
        shutil.rmtree(children.dir, ignore_errors=True)


def _write_json(path: str, obj: Any) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


class SelectPlugin:
    """Runs only the requested node ids, given to pytest as their files.

    pytest aborts the whole session (usage error, nothing runs) when a node-id argument cannot be
    resolved, e.g. because its file fails to import; collecting the files and deselecting the rest
    instead makes such a file one collection error and lets every other requested test run.
    """

    def __init__(self, nodeids: list[str], paths: list[str]) -> None:
        self.nodeids = set(nodeids)
        self.paths = tuple(p.rstrip("/") for p in paths)  # plain file/dir arguments: everything in them runs

    def _wanted(self, nodeid: str) -> bool:
        if nodeid in self.nodeids:
            return True
        file = nodeid.split("::", 1)[0]
        if any(file == p or file.startswith(p + "/") or p in (".", "") for p in self.paths):
            return True
        base = nodeid.split("[", 1)[0]  # a parametrized item of a requested function
        parts = base.split("::")
        return any("::".join(parts[:i]) in self.nodeids for i in range(2, len(parts) + 1))

    def pytest_collection_modifyitems(self, config: Any, items: list[Any]) -> None:
        keep = [i for i in items if self._wanted(i.nodeid)]
        dropped = [i for i in items if not self._wanted(i.nodeid)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


class PlainRewrite:
    """Rewrites the asserts of the files that stand for requested node ids as a plain run of the suite does.

    pytest rewrites every file named on its command line, and ``SelectPlugin`` names the files of the node
    ids; a plain run names none. So a source module with a doctest (``zipp/glob.py::zipp.glob.Translator``,
    which expects ``AssertionError: Invalid separators`` from an ``assert`` of its own) got pytest's
    explanation appended to that message and failed under every grading, though it passes plainly. For these
    files the rewriting hook decides as for a file nobody named: conftest, ``python_files`` or registered.
    """

    def __init__(self, files: Iterable[str]) -> None:
        self.files = frozenset(os.path.abspath(f) for f in files)

    def pytest_collection(self, session: Any) -> None:
        hook: Any = next((h for h in sys.meta_path if type(h).__name__ == "AssertionRewritingHook"), None)
        decide = getattr(hook, "_should_rewrite", None)
        if hook is None or decide is None or not hasattr(hook, "session"):
            return
        files = self.files

        def should_rewrite(name: str, fn: str, *rest: Any) -> bool:
            if os.path.abspath(fn) not in files:
                return bool(decide(name, fn, *rest))
            saved, hook.session = hook.session, None
            try:
                return bool(decide(name, fn, *rest))
            finally:
                hook.session = saved

        hook._should_rewrite = should_rewrite


class HypothesisBudget:
    """Every Hypothesis test runs the same examples in every run, ``HYPOTHESIS_MAX_EXAMPLES`` of them:
    ``derandomize`` (examples from the test itself, not a random seed: a baseline, a validation and
    every grading see the same cases, so the outcome of a property test is not a coin toss between the gold
    patch's gradings), no example database (it writes into the workspace and replays one run's failures in
    the next), no deadline and no ``too_slow`` health check (timing on a loaded machine is not an outcome),
    and no shrinking (a failing example fails as it is found; the reward reads outcomes, not minimal cases).
    The count and the phases are set, not lowered from what the test has: the package under test is imported
    before ``@given`` freezes ``settings.default``, so code under grading that loads a profile of one example
    would otherwise have each property test try a single case (one without the generate phase makes them skip).

    cattrs 26.2.1 runs 1,006 mostly-Hypothesis tests in 138 s a run, more than half of a 15 CPU-minute budget
    in profiling alone; two of its files took 21.3 s at 100 examples and 2.2 s at 10. The settings are
    applied to each collected test's own settings object (a profile loaded now would be too late, see above),
    over the project's choices. Nothing happens when Hypothesis is not imported, or when it is the project
    under test (its tests test settings).
    """

    def pytest_collection_modifyitems(self, config: Any, items: list[Any]) -> None:
        hyp = sys.modules.get("hypothesis")
        where = os.path.realpath(str(getattr(hyp, "__file__", "") or ""))
        if hyp is None or where.startswith(os.path.realpath(os.getcwd()) + os.sep):
            return
        for item in items:
            try:
                obj = item.obj
                fn = getattr(obj, "__func__", obj)
                current = getattr(fn, "_hypothesis_internal_use_settings", None)
                if current is None or not getattr(fn, "is_hypothesis_test", False):
                    continue
                phase = hyp.Phase
                slow = getattr(getattr(hyp, "HealthCheck", None), "too_slow", None)
                checks = tuple(current.suppress_health_check) + ((slow,) if slow is not None else ())
                fn._hypothesis_internal_use_settings = type(current)(
                    current, max_examples=HYPOTHESIS_MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                    phases=(phase.explicit, phase.generate, phase.target), suppress_health_check=checks)
            except Exception:  # an item without a Python object, an old Hypothesis: left as the project has it
                continue


class DuplicateIds:
    """Deselects every test whose node id more than one collected item has (a custom collector's names:
    pyyaml's conftest names items after data files, and some share a name).

    One id must mean one test: the ledger keeps the first record of each test phase and treats a second
    as forged, so the project's own second record flagged every grading of the original. Such tests
    cannot be told apart in any report, so none of them runs, in every backend alike. A ``dupes`` record
    says how many were dropped.
    """

    def __init__(self, sender: Any = None) -> None:
        self.send = send if sender is None else sender

    def pytest_collection_modifyitems(self, config: Any, items: list[Any]) -> None:
        seen: dict[str, int] = {}
        for item in items:
            seen[item.nodeid] = seen.get(item.nodeid, 0) + 1
        if any(n > 1 for n in seen.values()):
            dropped = [i for i in items if seen[i.nodeid] > 1]
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if seen[i.nodeid] == 1]
            self.send({"k": "dupes", "n": len(dropped), "ids": sorted({i.nodeid for i in dropped})[:20]})


class RestoreAutoload:
    """Puts ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` back as it was once this session's plugins are loaded: only
    the graded session itself runs without entry-point plugins (see the module docstring)."""

    def __init__(self, previous: str | None) -> None:
        self.previous = previous

    def pytest_configure(self, config: Any) -> None:
        if self.previous is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = self.previous


class StopAfter:
    """Ends the session once the test ``nodeid`` has run (its teardown reported), as ``--maxfail`` ends it
    (exit 1). The tests before it ran exactly as in a whole run. A node id that never runs stops nothing."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.session: Any = None

    def pytest_sessionstart(self, session: Any) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "teardown" and report.nodeid == self.nodeid and self.session is not None \
                and type(report).__name__ not in SUBTEST_REPORTS:
            self.session.shouldfail = f"stopped after {self.nodeid} (stop_after)"


class StopAtFailureOf:
    """Ends the session once one of ``nodeids`` has failed (its teardown reported), as ``--maxfail=1`` would
    for those tests alone: the others may fail and the run goes on. The tests before ran as in a whole run."""

    def __init__(self, nodeids: list[str]) -> None:
        self.nodeids = frozenset(nodeids)
        self.failed = ""
        self.session: Any = None

    def pytest_sessionstart(self, session: Any) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.nodeid not in self.nodeids or self.session is None:
            return
        if report.failed and not self.failed:
            self.failed = report.nodeid
        if report.when == "teardown" and self.failed == report.nodeid \
                and type(report).__name__ not in SUBTEST_REPORTS:
            self.session.shouldfail = f"stopped after {self.failed} failed (stop_at_failure_of)"


class TestDeadlineExceeded(BaseException):
    """Raised in a test that ran past ``test_deadline_s``: a BaseException, so ``except Exception`` in the
    code under test does not swallow it, and not one pytest re-raises (it is the test's failure)."""


class TestDeadline:
    """A test still running ``seconds`` after it started fails (``TestDeadlineExceeded`` from SIGALRM, raised
    again every second until the test ends, in case the code under test catches it).

    For trusted runs only (the battery's stand-ins): a stand-in that makes the code loop then costs one
    deadline, and a failing test is the witness that ends its grading, not the whole run's time limit
    (markdown's ListIndentProcessor: four stand-in gradings ran into their 47 s limit, 188 s of one
    candidate's 231). It can only turn a test into a failure. A loop inside C code is interrupted only when
    the C call returns: the run's own limit still holds.

    The clock runs in the call phase only (``pytest_runtest_call``, made a hook wrapper where the plugin is
    registered). Armed from ``logstart`` to ``logfinish``, it also covered setup and teardown, where its
    exception makes the test an *error*: a must-fail canary (``CANARY_DEADLINE_S``, 0.5 s) that a slow setup
    or a pause of the process pushed past it reported "error", not "failed", the grading was flagged as
    tampering, and idna 3.20 lost one accepted candidate per run as ``unstable`` (session 42). A loop in a
    fixture is left to the run's own limit.
    """

    def __init__(self, seconds: float, per_test: dict[str, float] | None = None) -> None:
        self.seconds = float(seconds)  # 0: no deadline for a test ``per_test`` does not name
        self.per_test = per_test or {}
        self.nodeid = ""
        self.current = 0.0

    def _expired(self, _signum: int, _frame: Any) -> None:
        raise TestDeadlineExceeded(f"{self.nodeid} ran past its {self.current:g}s deadline (test_deadline_s)")

    def pytest_runtest_call(self, item: Any) -> Any:  # a hook wrapper (``main``)
        import signal

        self.nodeid = nodeid = item.nodeid
        # a parametrized test's instances share the deadline given to the test function's id
        self.current = self.per_test.get(nodeid, self.per_test.get(nodeid.split("[", 1)[0], self.seconds))
        armed = False
        if self.current > 0:
            try:
                signal.signal(signal.SIGALRM, self._expired)
                signal.setitimer(signal.ITIMER_REAL, self.current, 1.0)
                armed = True
            except ValueError:  # not the main thread: no deadline (the run's own limit holds)
                pass
        try:
            yield
        finally:
            if armed:
                signal.setitimer(signal.ITIMER_REAL, 0.0)


FULL_TRACEBACKS = 25  # tracebacks: true formats this many failures; an output tail shows fewer anyway


class BriefFailures:
    """A failed test's report holds its exception's last line, not a formatted traceback, after the first
    ``full`` failures (``tracebacks: false``: 0).

    pytest formats every failure's traceback even under ``--tb=no`` (filtering and rendering its frames);
    in a run where most tests fail (validation's gradings of broken code, an agent's broken patch) that is
    most of the run. Outcomes are decided before any formatting, so they are the same either way.
    """

    def __init__(self, full: int = 0) -> None:
        self.full = full
        self.inside = False  # formatting one failure in full: pytest's own nested calls pass through

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        for item in items:
            item.repr_failure = self._wrap(item.repr_failure)
            item._repr_failure_py = self._wrap(item._repr_failure_py)

    def _wrap(self, original: Any) -> Any:
        def repr_failure(excinfo: Any, style: Any = None) -> Any:
            if not self.inside:
                if self.full <= 0:
                    return _brief_failure(excinfo)
                self.full -= 1
            outer, self.inside = self.inside, True
            try:
                return original(excinfo) if style is None else original(excinfo, style)
            finally:
                self.inside = outer
        return repr_failure


def _brief_failure(excinfo: Any, style: Any = None) -> str:
    """The exception's last line (what a conftest hook matching ``str(report.longrepr)`` looks for), no frames."""
    try:
        return f"E   {excinfo.exconly()}\n(traceback not formatted)"
    except Exception:  # an exception whose str() raises
        return f"E   {excinfo.typename}\n(traceback not formatted)"


def _split_nodeids(args: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(args with every ``file::name`` node id replaced by its file, the node ids, the plain path args).

    The files of the node ids run in the order a plain ``pytest`` walks them (sorted by path, directory by
    directory), wherever their ids stand in the request: pyrsistent's ``vector_test.py`` reloads
    ``pyrsistent._pvector``, and ``checked_map_test.py`` run after it fails with a RecursionError, which a
    plain run (``c`` before ``v``) never shows; a request in shuffled order failed gold gradings at random.
    """
    out: list[str] = []
    nodeids: list[str] = []
    paths: list[str] = []
    files: list[str] = []
    at = 0  # where the first node id's file stood among ``out``
    for i, arg in enumerate(args):
        path = arg.split("::", 1)[0]
        after_option = i > 0 and args[i - 1].startswith("-") and "=" not in args[i - 1] and len(args[i - 1]) == 2
        if arg.startswith("-") or after_option or not os.path.exists(path):
            out.append(arg)
        elif "::" in arg and os.path.isfile(path):
            nodeids.append(arg)
            if path not in files:
                at = at if files else len(out)
                files.append(path)
        else:
            paths.append(os.path.normpath(arg).replace(os.sep, "/"))
            out.append(arg)
    out[at:at] = sorted(files, key=lambda f: os.path.normpath(f).split(os.sep))
    return out, nodeids, paths


_CONFIG_FILES = (("pytest.ini", None), (".pytest.ini", None), ("pyproject.toml", "[tool.pytest.ini_options]"),
                 ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]"))


def _anchor_to_workspace(args: list[str], scratch: str) -> list[str]:
    """Keep pytest inside the workspace (the current directory).

    Without this, a workspace that has no pytest configuration of its own makes pytest search the
    parent directories for one, and a workspace that sits inside another project (a work area under a
    repository) would take that project's rootdir, ini options and conftest files.
    """
    if any(a == "-c" or a.startswith(("-c=", "--config-file", "--rootdir")) for a in args):
        return args
    extra = ["--rootdir=.", "--confcutdir=."]
    has_config = False
    import pytest  # called after sys.path is ordered and the shadowing check (see main)

    native = int(pytest.__version__.split(".")[0]) >= 9  # pytest 9 reads [tool.pytest] (humanize 4.17.0)
    for name, section in (*_CONFIG_FILES, *((("pyproject.toml", "[tool.pytest]"),) if native else ())):
        if os.path.isfile(name):
            try:
                with open(name, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
            except OSError:
                continue
            if section is None or section in text:
                has_config = True
                break
    if not has_config:
        empty = os.path.join(scratch, "taskforge-empty-pytest.ini")
        with open(empty, "w", encoding="utf-8") as fh:
            fh.write("[pytest]\n")
        extra = ["-c", empty, *extra]
    return [*extra, *args]


def _site_dirs() -> list[str]:
    import site
    import sysconfig

    dirs = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
    dirs.update(os.path.realpath(d) for d in site.getsitepackages())
    return sorted(dirs)


def _order_sys_path(src_roots: list[str]) -> None:
    """The workspace's source roots after site-packages: a workspace module never hides an installed one."""
    roots = {os.path.realpath(r) for r in src_roots}
    kept = [p for p in sys.path if not p or os.path.realpath(p) not in roots]
    sys.path[:] = kept + [r for r in src_roots if os.path.isdir(r)]


def suite_paths(paths: Any) -> list[str]:
    """The whole-suite paths of a request that exist in the workspace (the cwd). mako 1.4's test paths are 23 file
    names: once the hiding removed one whole, pytest given the missing path collected nothing ("file or directory
    not found"), and 79 of 112 candidates were rejected ``no_pass_to_pass``. All of them when none exists (pytest
    then says why)."""
    if not isinstance(paths, list):
        return []
    names = [str(p) for p in paths]
    present = [p for p in names if os.path.lexists(p.split("::", 1)[0])]
    return present or names


def _env_plugin_entries() -> list[tuple[str, str]]:
    """(entry-point name, module) of every ``pytest11`` plugin of a distribution installed in site-packages."""
    from importlib import metadata

    sites = tuple(d + os.sep for d in _site_dirs())
    out: list[tuple[str, str]] = []
    for dist in metadata.distributions():
        where = os.path.realpath(str(dist.locate_file("")))
        if not (where + os.sep).startswith(sites):
            continue  # a dist-info found on the workspace's path: never loaded
        out += [(ep.name, ep.value.split(":", 1)[0].strip()) for ep in dist.entry_points if ep.group == "pytest11"]
    return out


RUNNER_BLOCKED = ("cacheprovider", "randomly")  # ``-p no:NAME`` the runner always gives


def _env_plugins(entries: list[tuple[str, str]], blocked: Iterable[str] = RUNNER_BLOCKED) -> list[str]:
    """``-p MODULE`` for each plugin of ``entries`` (``_env_plugin_entries``), once, but none that a
    ``-p no:NAME`` blocks by its entry-point name: a later ``-p MODULE`` unblocks and loads it. The obsolete
    pytest-cache 1.0 (fastjsonschema 2.22.3's test extra) registers as ``cacheprovider`` and crashed every
    grading (``config.inicfg.config`` under pytest 9, once the clean ini has options): 71 gold_failed, 0
    tasks; pytest-randomly (``randomly``) would shuffle every run."""
    names = set(blocked)
    names |= {f"pytest_{n}" for n in names if not n.startswith("pytest_")}
    out: list[str] = []
    for name, module in entries:
        if module and module not in out and name not in names and module not in names:
            out += ["-p", module]
    return out


def _blocked_plugins(args: list[str]) -> list[str]:
    """The NAMEs of ``-p no:NAME`` / ``-pno:NAME`` options among ``args``."""
    out = []
    for i, tok in enumerate(args):
        value = args[i + 1] if tok == "-p" and i + 1 < len(args) else tok[2:] if tok.startswith("-pno:") else ""
        if value.startswith("no:"):
            out.append(value[3:])
    return out


def _drop_loaded_plugin_args(args: list[str], loaded: set[str]) -> list[str]:
    """``-p NAME`` options for a plugin the runner already loads by its module: pytest would register it a
    second time under its entry-point name and stop with "Plugin already registered under a different
    name" (multidict's addopts ``-p pytest_cov``, kept in grading runs, broke every one of them)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        tok = str(args[i])
        if tok == "-p" and i + 1 < len(args) and str(args[i + 1]) in loaded:
            i += 2
            continue
        if tok.startswith("-p") and not tok.startswith("--") and len(tok) > 2 and tok[2:] in loaded:
            i += 1
            continue
        out.append(tok)
        i += 1
    return out


def _split_plugin_args(args: list[str]) -> tuple[list[str], list[str]]:
    """(the ``-p NAME`` / ``-pNAME`` options of ``args``, the other arguments), each in its order."""
    plugins: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        tok = str(args[i])
        if tok == "-p" and i + 1 < len(args):
            plugins += [tok, str(args[i + 1])]
            i += 2
            continue
        (plugins if tok.startswith("-p") and not tok.startswith("--") and len(tok) > 2 else rest).append(tok)
        i += 1
    return plugins, rest


def _installed_names() -> set[str]:
    """Top-level module names of the stdlib and of everything installed in site-packages."""
    names = set(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging",
                                            "coverage", "sitecustomize", "usercustomize"}
    for site_dir in _site_dirs():
        try:
            entries = os.listdir(site_dir)
        except OSError:
            continue
        for e in entries:
            if e.endswith((".dist-info", ".egg-info", ".pth")) or e.startswith((".", "__")):
                continue
            names.add(e.split(".", 1)[0] if e.endswith((".py", ".so", ".pyd")) or "." in e else e)
    return names


def _shadowing(roots: list[str], allowed: set[str]) -> list[str]:
    """Workspace top-level modules the original did not have that take an installed or stdlib name."""
    installed = _installed_names()
    found = []
    for root in dict.fromkeys([os.getcwd(), *roots]):
        try:
            entries = os.listdir(root)
        except OSError:
            continue
        for e in entries:
            path = os.path.join(root, e)
            if e.endswith((".py", ".pyc", ".so", ".pth")):
                name = e.split(".", 1)[0]
            elif os.path.isdir(path) and not e.startswith("."):
                name = e
            else:
                continue
            if name in installed and name not in allowed:
                found.append(os.path.relpath(path))
    return sorted(found)


def loopback_up() -> bool:
    """Set ``lo`` up when it is down and this process may (its own network namespace); True when it is up."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            flags = struct.unpack("16sh14x", fcntl.ioctl(sock, siocgifflags, struct.pack("16sh14x", b"lo", 0)))[1]
            if flags & iff_up:
                return True
            fcntl.ioctl(sock, siocsifflags, struct.pack("16sh14x", b"lo", flags | iff_up))
            return True
    except OSError:  # no such interface, or not ours to change (then it is up: the host's or the jail's)
        return False


def default_signals() -> None:
    """Signals as a foreground ``python`` starts with, whoever started taskforge: a run launched with ``nohup`` or
    ``&`` from a non-interactive shell inherits SIGINT ignored, Python then installs no KeyboardInterrupt handler,
    and ecdsa 0.19.2's ``test_multithreading_with_interrupts`` (it sends itself SIGINT) failed in the baseline
    while plain pytest passed it."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # (SIGHUP stays as ``nohup`` set it: a logout must not
        signal.signal(signal.SIGINT, signal.default_int_handler)  # kill the runs of a taskforge left running)


def _quiet_unittest_main() -> None:
    """``unittest.main()`` does nothing under the runner. toposort 1.10's test file ends with a bare
    ``unittest.main()`` (no ``if __name__ == "__main__"``): at collection it parsed pytest's arguments, rejected
    them and raised SystemExit, so pytest collected nothing (plain pytest: internal error, no test run). The
    test classes it defines are what pytest runs anyway."""
    import unittest

    def main(*args: Any, **kwargs: Any) -> None:
        return None

    unittest.main = main  # type: ignore[assignment,misc]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: pytest_runner.py REQUEST.json", file=sys.stderr)
        return 4
    default_signals()
    with open(argv[1], encoding="utf-8") as fh:
        request = json.load(fh)
    if request.get("grading"):
        try:
            os.unlink(argv[1])  # what the run was asked (its test ids) is nothing the graded code may read
        except OSError:
            pass
    open_channel(request)
    out = send  # the channel's writer as it is before any graded code runs (``ReportPlugin.send``)
    loopback_up()
    out({"k": "hello", "pid": os.getpid()})
    start = time.monotonic()
    src_roots = [str(r) for r in request.get("src_roots", [])]
    _order_sys_path(src_roots)
    autoload = RestoreAutoload(os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"))
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if request.get("shadow_allowed") is not None:
        shadows = _shadowing(src_roots, set(request["shadow_allowed"]))
        if shadows:
            out({"k": "shadow", "paths": shadows[:20]})
            out({"k": "end", "exit": 4, "dur": round(time.monotonic() - start, 6)})
            return 4
    collect_only = bool(request.get("collect_only"))
    want_cov = bool(request.get("coverage")) and not collect_only
    scratch = os.path.dirname(os.path.abspath(argv[1]))

    # a file that fails to collect must not hide the rest of the suite: its tests are just absent
    entries = _env_plugin_entries()
    requested = [str(a) for a in request.get("args", [])]
    requested += suite_paths(request.get("suite_paths"))
    env_plugins = _env_plugins(entries, (*RUNNER_BLOCKED, *_blocked_plugins(requested)))
    if entries:
        requested = _drop_loaded_plugin_args(requested, {n for e in entries for n in e})
    requested_plugins, requested = _split_plugin_args(requested)
    # the request's ``-p`` plugins (the grading plugin) before the environment's: a project that is itself a
    # pytest plugin (pytest-mock) has its workspace module imported by its ``-p``, and that code must not run
    # before the grading plugin has taken its snapshot (plain pytest, too, imports ``-p`` plugins first)
    args = ["-p", "no:cacheprovider", "-p", "no:randomly", "--continue-on-collection-errors", *requested_plugins,
            *env_plugins, *requested]
    if "pytest_benchmark.plugin" in env_plugins and not any(str(a).startswith("--benchmark-") for a in args):
        args.append("--benchmark-disable")  # each benchmark body runs once, as a test: no timing rounds
    args = _anchor_to_workspace(args, scratch)
    if collect_only:
        args.append("--collect-only")
    if request.get("tracebacks", True) is False:
        args.append("--tb=no")
    if request.get("stop_at_failure") is True and not collect_only:
        args.append("--maxfail=1")

    import pytest  # only now: after sys.path is ordered and the shadowing check

    if request.get("grading"):
        import _pytest.runner

        def _unset_current_test(item: Any, when: Any) -> None:
            os.environ.pop("PYTEST_CURRENT_TEST", None)

        _pytest.runner._update_current_test_var = _unset_current_test

    _quiet_unittest_main()
    plugins: list[Any] = [DuplicateIds(out), HypothesisBudget()]
    args, nodeids, paths = _split_nodeids(args)
    if nodeids:
        plugins.append(SelectPlugin(nodeids, paths))
        plugins.append(PlainRewrite({n.split("::", 1)[0] for n in nodeids} - set(paths)))
    cov = _coverage_start(request) if want_cov else None
    plugin = ReportPlugin(cov=cov, collect_only=collect_only,
                          packages=package_names(request.get("coverage_source") or ()) if cov is not None else (),
                          sender=out)
    shared = None
    if cov is not None:
        SharedSetup.pytest_fixture_setup = pytest.hookimpl(hookwrapper=True)(  # type: ignore[method-assign]
            SharedSetup.pytest_fixture_setup)
        shared = SharedSetup(plugin)
        plugins.append(shared)
    plugins.append(autoload)
    plugins.append(BriefFailures(0 if request.get("tracebacks", True) is False else FULL_TRACEBACKS))
    if request.get("stop_after") and not collect_only:
        plugins.append(StopAfter(str(request["stop_after"])))
    if isinstance(request.get("stop_at_failure_of"), list) and request["stop_at_failure_of"] and not collect_only:
        plugins.append(StopAtFailureOf([str(n) for n in request["stop_at_failure_of"]]))
    deadline = request.get("test_deadline_s")
    deadline = float(deadline) if isinstance(deadline, (int, float)) and not isinstance(deadline, bool) else 0.0
    own = request.get("test_deadlines")
    own = {str(k): float(v) for k, v in own.items() if isinstance(v, (int, float)) and v >= 0} \
        if isinstance(own, dict) else {}  # 0: that test has no deadline
    if (deadline > 0 or own) and not collect_only:
        TestDeadline.pytest_runtest_call = pytest.hookimpl(hookwrapper=True)(  # type: ignore[method-assign]
            TestDeadline.pytest_runtest_call)
        plugins.append(TestDeadline(max(deadline, 0.0), own))
    exit_code = 3
    try:
        exit_code = int(pytest.main(args, plugins=[plugin, *plugins]))
    finally:
        if cov is not None:
            _coverage_write(cov, request.get("coverage_json") or "coverage.json", shared)
        out({"k": "end", "exit": exit_code, "dur": round(time.monotonic() - start, 6)})
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
