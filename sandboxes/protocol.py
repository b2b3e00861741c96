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
    collect_only: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment variables
    canaries: bool = False  # add tamper canaries (reward path)
    xdist_workers: int = 0  # >0: run with pytest-xdist when the environment has it


@dataclass(frozen=True, slots=True)
class RunOutput:
    report: TestReport
    coverage: CoverageContexts | None = None
    seconds: float = 0.0  # wall time including sandbox overhead


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
