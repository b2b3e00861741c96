"""In-sandbox test runner: run pytest, write a per-test JSON report (and per-test line coverage).

Standalone on purpose: stdlib + pytest (+ coverage.py when coverage is asked for). It never imports
taskforge, because it is copied into sandboxes (virtualenvs, containers) where taskforge is absent.

    python pytest_runner.py REQUEST.json

REQUEST.json keys (unknown keys are ignored):
    args             list[str]  pytest arguments (node ids, paths, options)
    report_path      str        where to write the report: ``taskforge.core.testreport.TestReport.to_dict()``
    coverage         bool       measure per-test line coverage (coverage.py, one context per test)
    coverage_source  list[str]  files/dirs whose lines are measured (relative to the cwd or absolute)
    coverage_json    str        where to write ``{relative file: {line: [node ids]}}``
    collect_only     bool       only collect: every collected test is reported as "skipped" and the
                                report carries the flag "collect_only"
    tracebacks       bool       false: ``--tb=no`` (the caller reads outcomes only)

The runner always adds ``-p no:cacheprovider -p no:randomly --continue-on-collection-errors`` (a test
file that cannot be collected is listed in ``collection_errors``; the other files still run).
The exit code of this script is pytest's exit code (4 when the request itself is unusable).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import pytest

# outcome precedence when several phases of one test report: the worst wins
_RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "xpassed": 2, "failed": 3, "error": 4}


class ReportPlugin:
    """Collects one outcome and the summed phase durations per test node id."""

    def __init__(self, cov: Any = None, collect_only: bool = False) -> None:
        self.cov = cov
        self.collect_only = collect_only
        self.outcomes: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.order: list[str] = []
        self.collection_errors: list[str] = []
        self.collected: list[str] = []

    # --- coverage contexts: one per test, named by its node id -------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> None:
        if self.cov is not None:
            self.cov.switch_context(item.nodeid)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        if self.cov is not None:
            self.cov.switch_context("")

    # --- outcomes -------------------------------------------------------------------------------
    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collection_errors.append(report.nodeid or "<session>")

    def pytest_collection_finish(self, session: Any) -> None:
        self.collected = [item.nodeid for item in session.items]

    def pytest_runtest_logreport(self, report: Any) -> None:
        nodeid = report.nodeid
        if nodeid not in self.outcomes:
            self.order.append(nodeid)
            self.outcomes[nodeid] = "passed"
            self.durations[nodeid] = 0.0
        self.durations[nodeid] += float(getattr(report, "duration", 0.0) or 0.0)
        outcome = _phase_outcome(report)
        if outcome is None:
            return
        if _RANK[outcome] >= _RANK[self.outcomes[nodeid]]:
            self.outcomes[nodeid] = outcome

    def results(self) -> list[dict[str, Any]]:
        if self.collect_only:
            return [{"nodeid": n, "outcome": "skipped", "duration": 0.0} for n in self.collected]
        return [
            {"nodeid": n, "outcome": self.outcomes[n], "duration": round(self.durations[n], 6)}
            for n in self.order
        ]


def _phase_outcome(report: Any) -> str | None:
    """Map one phase report (setup/call/teardown) to an outcome, or None when it says nothing new."""
    wasxfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "xpassed" if wasxfail else "passed"
        if report.skipped:
            return "xfailed" if wasxfail else "skipped"
        return "failed"
    # setup / teardown
    if report.failed:
        return "error"
    if report.skipped:  # skipped in setup (skip marker, skipif, importorskip in a fixture)
        return "xfailed" if wasxfail else "skipped"
    return None


def _coverage_start(request: dict[str, Any]) -> Any:
    import coverage  # only needed when coverage is asked for

    include = []
    for src in request.get("coverage_source") or ["."]:
        path = os.path.abspath(src)
        include.append(os.path.join(path, "*") if os.path.isdir(path) else path)
    cov = coverage.Coverage(data_file=None, include=include, config_file=False, branch=False)
    cov.start()
    return cov


def _coverage_write(cov: Any, path: str) -> None:
    cov.stop()
    data = cov.get_data()
    cwd = os.getcwd()
    out: dict[str, dict[str, list[str]]] = {}
    for filename in sorted(data.measured_files()):
        by_line = data.contexts_by_lineno(filename)
        lines = {str(ln): sorted(c for c in ctxs if c) for ln, ctxs in sorted(by_line.items())}
        lines = {ln: ctxs for ln, ctxs in lines.items() if ctxs}
        if lines:
            out[os.path.relpath(filename, cwd)] = lines
    _write_json(path, out)


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


def _split_nodeids(args: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(args with every ``file::name`` node id replaced by its file, the node ids, the plain path args)."""
    out: list[str] = []
    nodeids: list[str] = []
    paths: list[str] = []
    for i, arg in enumerate(args):
        path = arg.split("::", 1)[0]
        after_option = i > 0 and args[i - 1].startswith("-") and "=" not in args[i - 1] and len(args[i - 1]) == 2
        if arg.startswith("-") or after_option or not os.path.exists(path):
            out.append(arg)
        elif "::" in arg and os.path.isfile(path):
            nodeids.append(arg)
            if path not in out:
                out.append(path)
        else:
            paths.append(os.path.normpath(arg).replace(os.sep, "/"))
            out.append(arg)
    return out, nodeids, paths


_CONFIG_FILES = (("pytest.ini", None), (".pytest.ini", None), ("pyproject.toml", "[tool.pytest.ini_options]"),
                 ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]"))


def _anchor_to_workspace(args: list[str], report_path: str) -> list[str]:
    """Keep pytest inside the workspace (the current directory).

    Without this, a workspace that has no pytest configuration of its own makes pytest search the
    parent directories for one, and a workspace that sits inside another project (a work area under a
    repository) would take that project's rootdir, ini options and conftest files.
    """
    if any(a == "-c" or a.startswith(("-c=", "--config-file", "--rootdir")) for a in args):
        return args
    extra = ["--rootdir=.", "--confcutdir=."]
    has_config = False
    for name, section in _CONFIG_FILES:
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
        empty = os.path.join(os.path.dirname(os.path.abspath(report_path)), "taskforge-empty-pytest.ini")
        with open(empty, "w", encoding="utf-8") as fh:
            fh.write("[pytest]\n")
        extra = ["-c", empty, *extra]
    return [*extra, *args]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: pytest_runner.py REQUEST.json", file=sys.stderr)
        return 4
    with open(argv[1], encoding="utf-8") as fh:
        request = json.load(fh)
    report_path = request["report_path"]
    collect_only = bool(request.get("collect_only"))
    want_cov = bool(request.get("coverage")) and not collect_only

    # a file that fails to collect must not hide the rest of the suite: its tests are just absent
    args = ["-p", "no:cacheprovider", "-p", "no:randomly", "--continue-on-collection-errors",
            *[str(a) for a in request.get("args", [])]]
    args = _anchor_to_workspace(args, report_path)
    if collect_only:
        args.append("--collect-only")
    if request.get("tracebacks", True) is False:
        args.append("--tb=no")

    plugins: list[Any] = []
    args, nodeids, paths = _split_nodeids(args)
    if nodeids:
        plugins.append(SelectPlugin(nodeids, paths))
    cov = _coverage_start(request) if want_cov else None
    plugin = ReportPlugin(cov=cov, collect_only=collect_only)
    start = time.monotonic()
    try:
        exit_code = int(pytest.main(args, plugins=[plugin, *plugins]))
    finally:
        if cov is not None:
            _coverage_write(cov, request.get("coverage_json") or "coverage.json")
    duration = time.monotonic() - start
    report = {
        "results": plugin.results(),
        "exit_code": exit_code,
        "duration": round(duration, 6),
        "timed_out": False,
        "collection_errors": plugin.collection_errors,
        "output_tail": "",
        "flags": ["collect_only"] if collect_only else [],
    }
    _write_json(report_path, report)
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
