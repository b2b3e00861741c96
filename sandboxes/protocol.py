"""The ``Sandbox`` seam: build an environment once per repository, run tests in a workspace.

Side-effect free: only types. Implementations: ``sandboxes.local.LocalSandbox`` (virtualenv +
subprocess, the embedded default) and ``sandboxes.docker.DockerSandbox`` (docker SDK).
Both run the same in-sandbox runner (``sandboxes/runner/pytest_runner.py``) and return the same reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from taskforge.core.environment import EnvSpec, PreparedEnv
from taskforge.core.testreport import TestReport

# line coverage per file: {workspace-relative path: {line number: [test node ids that ran it]}}
CoverageContexts = Mapping[str, Mapping[int, tuple[str, ...]]]


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One test run inside a sandbox."""

    tests: tuple[str, ...] = ()  # pytest node ids or paths; empty = the spec's test_paths
    timeout_s: float = 900.0  # wall clock; the whole process tree / container is killed past it
    coverage: bool = False  # collect per-test line coverage (coverage.py dynamic contexts)
    coverage_omit: tuple[str, ...] = ()  # workspace-relative files coverage does not measure (test files: no
    #                                      query ever asks for their lines, and tracing them cost networkx's
    #                                      coverage run about half its overhead)
    collect_only: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment variables
    read_only: tuple[str, ...] = ()  # workspace-relative files/dirs the run must not change (tests, configs)
    shadow_allowed: tuple[str, ...] | None = None  # grading: the top-level names the workspace may define
    #                                                (``None``: no shadowing check)
    grading: bool = False  # the run grades untrusted code (the runner hides PYTEST_CURRENT_TEST)
    tracebacks: bool = True  # False: ``--tb=no`` (callers that read outcomes only; 100 tracebacks cost more
    #                          than the tests)
    stop_at_failure: bool = False  # ``--maxfail=1``: stop after the first failing test (callers that only
    #                                need to know that something fails, and which test did first)
    stop_after: str = ""  # a node id: stop once that test has run (its teardown reported); the tests before
    #                       it ran exactly as in a whole run
    stop_at_failure_of: tuple[str, ...] = ()  # node ids: stop after the first of these that fails (others
    #                                           may fail without stopping the run)
    test_deadline_s: float = 0.0  # > 0: a test still running after this many seconds fails (trusted runs:
    #                               the battery's stand-ins, which can make the code loop)
    test_deadlines: Mapping[str, float] = field(default_factory=dict)  # node id -> its own deadline (0:
    #                                                                    none), instead of ``test_deadline_s``


@dataclass(frozen=True, slots=True)
class RunOutput:
    report: TestReport
    coverage: CoverageContexts | None = None
    seconds: float = 0.0  # wall time including sandbox overhead


@dataclass(frozen=True, slots=True)
class EnvironmentFiles:
    """Where the files of an environment (what the agent's tests run with) can be read, for the leak audit.

    Exactly one of ``directory`` (a virtualenv on this host) and ``image`` (a docker image id or tag) is
    set; ``base_image`` names the image ``image`` was built from, whose layers hold no project code.
    """

    directory: Path | None = None
    image: str | None = None
    base_image: str | None = None
    stdlib: Path | None = None
    """The standard library the runs import, on this host (the local sandbox's base interpreter's)."""
    stdlib_skip: tuple[str, ...] = ()
    """Folders of ``stdlib`` (relative) that runs do not see (``isolation.python_hidden``)."""


@runtime_checkable
class Sandbox(Protocol):
    """Runs a repository's tests in isolation. Threat model: see each implementation's docstring."""

    name: str

    def prepare(self, spec: EnvSpec, repo_dir: Path) -> PreparedEnv:
        """Build (or reuse, keyed by ``spec.key``) the environment. ``repo_dir`` is read, never modified.

        Raises ``EnvironmentBuildError`` with the failing command and the log tail.
        """
        ...

    def run(self, env: PreparedEnv, workspace: Path, request: RunRequest) -> RunOutput:
        """Run tests of ``workspace`` (a directory holding the repository's files) in ``env``.

        Never raises for what the code under test does (crash, hang, tampering): that is in the report.
        """
        ...

    def warm(self) -> Sandbox:
        """A sandbox with the same reports whose runs may reuse a warm interpreter (or ``self``)."""
        ...

    def clone_env(self, env: PreparedEnv, scratch: Path) -> PreparedEnv:
        """An environment equal to ``env`` that no earlier run has touched (it may live under ``scratch``)."""
        ...

    def environment_files(self, env: PreparedEnv) -> EnvironmentFiles:
        """Where the leak audit reads the files of ``env``."""
        ...
