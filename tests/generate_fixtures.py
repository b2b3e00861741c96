"""Seams for the generator tests: a tiny project with a real test suite, and a host-interpreter sandbox.

``make_mini_project(root)`` writes ``minipkg``: a statistics module (functions worth a task, a trivial
one, an untested one), an optional text-formatting module that only its own tests use (a ``module``
candidate), and pytest tests for both. ``HostSandbox`` is a fake of the ``Sandbox`` seam that runs the
real in-sandbox runner (``sandboxes/runner/pytest_runner.py``, coverage included) with this interpreter: no
environment to build, so the pipeline's tests take seconds. It is picklable (process pools, Ray).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sandboxes.local import build_request, read_coverage, read_report
from sandboxes.protocol import RunOutput, RunRequest
from sandboxes.warm import WarmServer, run_forked, start_server
from taskforge.core.environment import EnvSpec, PreparedEnv
from taskforge.core.process import run_capture

RUNNER = Path(__file__).resolve().parents[1] / "sandboxes" / "runner" / "pytest_runner.py"

STATS = '''\
"""Small statistics helpers."""


def mean(xs):
    """Arithmetic mean of a non-empty sequence of numbers."""
    total = 0
    for x in xs:
        total += x
    return total / len(xs)


def spread(xs):
    """Largest minus smallest value."""
    lo = min(xs)
    hi = max(xs)
    return hi - lo


def ident(x):
    return x


def untested(x):
    """No test calls this."""
    y = x + 1
    return y * 2
'''

TEXTFMT = '''\
"""Text formatting that nothing else in the package needs."""


def title_words(text):
    """Capitalise every word of ``text``."""
    words = text.split()
    return " ".join(w.capitalize() for w in words)


def shout(text):
    """Upper-case ``text`` and add an exclamation mark."""
    loud = text.upper()
    return loud + "!"
'''

TEST_STATS = '''\
from minipkg.stats import ident, mean, spread


def test_mean_ints():
    assert mean([1, 2, 3]) == 2


def test_mean_floats():
    assert mean([0.5, 1.5]) == 1.0


def test_spread():
    assert spread([3, 9, 4]) == 6


def test_spread_single():
    assert spread([7]) == 0


def test_ident():
    assert ident(5) == 5
'''

TEST_TEXTFMT = '''\
from minipkg.textfmt import shout, title_words


def test_title_words():
    assert title_words("hello big world") == "Hello Big World"


def test_shout():
    assert shout("hey") == "HEY!"
'''

CHECKS = '''\
"""Input checks."""


def checked(xs):
    """Length of ``xs``; raise on an empty sequence."""
    if not xs:
        raise ValueError("empty")
    return len(xs)
'''

TEST_CHECKS = '''\
import pytest

from minipkg.checks import checked


def test_checked_rejects_empty():
    with pytest.raises(Exception):
        checked([])
'''

PROJECT = {
    "minipkg/__init__.py": '"""A mini package for generator tests."""\n',
    "minipkg/stats.py": STATS,
    "minipkg/textfmt.py": TEXTFMT,
    "tests/test_stats.py": TEST_STATS,
    "tests/test_textfmt.py": TEST_TEXTFMT,
}
# ``checked``'s only test passes whatever the body raises: a stub of it has no FAIL_TO_PASS test
WITH_CHECKS = {"minipkg/checks.py": CHECKS, "tests/test_checks.py": TEST_CHECKS}


def make_mini_project(root: Path, extra: dict[str, str] | None = None) -> Path:
    """Write ``minipkg`` (plus ``extra`` files) under ``root``; returns ``root``."""
    for rel, text in {**PROJECT, **(extra or {})}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


class HostSandbox:
    """Runs the real runner with this interpreter (no isolation: a seam fake, not a sandbox).

    Runs without coverage fork from one warm server per process (``sandboxes.warm``), as
    validation's local runs do; coverage runs start a fresh interpreter.
    """

    name = "host"

    def __init__(self) -> None:
        self._server: WarmServer | None = None
        self._dir: str | None = None

    def __getstate__(self) -> dict[str, object]:
        return {}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__()  # type: ignore[misc]

    def prepare(self, spec: EnvSpec, repo_dir: Path) -> PreparedEnv:
        return PreparedEnv(spec, self.name, sys.prefix, platform.python_version())

    def _env(self, workspace: Path, scratch: Path, spec: EnvSpec, extra: dict[str, str]) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch / "home"),
                "TMPDIR": str(scratch / "tmp"), "PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPATH": os.pathsep.join(str(workspace / r) for r in spec.src_roots), **extra}

    def run(self, env: PreparedEnv, workspace: Path, request: RunRequest) -> RunOutput:
        if not request.coverage:
            if self._server is None or not self._server.alive():
                self._dir = tempfile.mkdtemp(prefix="tf-host-warm-")
                shutil.copyfile(RUNNER, Path(self._dir, "pytest_runner.py"))
                base = {k: v for k, v in self._env(Path(self._dir), Path(self._dir), env.spec, {}).items()
                        if k != "PYTHONPATH"}
                self._server = start_server([sys.executable], Path(self._dir), base, Path(self._dir))
            ws = Path(workspace).resolve()
            return run_forked(self._server, env.spec, ws, request,
                              lambda scratch: self._env(ws, scratch, env.spec, dict(request.env)))
        start = time.monotonic()
        workspace = Path(workspace).resolve()
        with tempfile.TemporaryDirectory(prefix="tf-host-") as tmp:
            scratch = Path(tmp)
            req = build_request(env.spec, workspace, request, scratch)
            (scratch / "request.json").write_text(json.dumps(req))
            runner = scratch / "runner" / "pytest_runner.py"
            runner.parent.mkdir()
            shutil.copyfile(RUNNER, runner)
            child_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "PYTHONHASHSEED": "0",
                         "TZ": "UTC", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                         "PYTHONPATH": os.pathsep.join(str(workspace / r) for r in env.spec.src_roots),
                         **request.env}
            rc, tail = run_capture([sys.executable, str(runner), str(scratch / "request.json")], request.timeout_s,
                                   cwd=workspace, env=child_env, tail=6000)
            report = read_report(Path(req["report_path"]), rc, time.monotonic() - start, tail)
            coverage = read_coverage(Path(req["coverage_json"])) if request.coverage and rc is not None else None
        return RunOutput(report, coverage, round(time.monotonic() - start, 3))


def main(argv: list[str]) -> int:
    """``python tests/generate_fixtures.py SRC OUT WORK_DIR``: generate through ``HostSandbox``.

    Prints ``validated N`` (candidates validated by this run, journaled ones excluded) as its last line;
    the resume test kills it with SIGKILL and runs it again.
    """
    from taskforge.core.settings import Settings
    from taskforge.pipeline.executors import SyncExecutor
    from taskforge.pipeline.generate import GenerateOptions, generate

    src, out, work = argv[1:4]
    settings = Settings.load({"work_dir": work, "baseline_runs": 2, "test_timeout_s": 300})
    validated = []
    generate([src], Path(out), settings, GenerateOptions(max_candidates=6), SyncExecutor(),
             emit=lambda event, data: validated.append(data) if event == "candidate" else None, sandbox=HostSandbox())
    print(f"validated {len(validated)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(sys.argv))
