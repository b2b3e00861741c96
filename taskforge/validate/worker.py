"""What a validation worker keeps between candidates: the profile, the sandbox and the repository's one
environment, each built once per process (``functools.lru_cache``), and two sandbox adapters.

Candidates of one repository run in the same worker (process pool or Ray actor) one after another:
loading the profile, starting a warm sandbox or preparing an environment again for each would cost
more than validating most candidates.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from taskforge.core.settings import Settings
from taskforge.core.task import Task


@functools.lru_cache(maxsize=8)
def load_profile(profile_dir: str) -> Any:
    from taskforge.profile.build import Profile

    return Profile.load(Path(profile_dir))


@functools.lru_cache(maxsize=4)
def _sandbox(settings_items: tuple[tuple[str, Any], ...], warm: bool) -> Any:
    from sandboxes.local import LocalSandbox
    from sandboxes.selection import make_sandbox
    from sandboxes.warm import WarmLocalSandbox

    box = make_sandbox(Settings.load(dict(settings_items)))
    return WarmLocalSandbox(box) if warm and isinstance(box, LocalSandbox) else box


def sandbox_for(settings: Mapping[str, Any], warm: bool = True) -> Any:
    """This worker's sandbox for ``settings`` (``warm``: local runs fork from ``sandboxes.warm``)."""
    return _sandbox(tuple(sorted((k, v) for k, v in settings.items())), warm)


@functools.lru_cache(maxsize=8)
def prepared_env(profile_dir: str, sandbox: Any) -> Any:
    """The repository's one environment in this worker: the profile's, or prepared once per sandbox."""
    profile = load_profile(profile_dir)
    if profile.env.backend == sandbox.name:
        return profile.env
    return sandbox.prepare(profile.spec, profile.repo_dir)


QUIET = ("--tb=no",)  # validation reads outcomes only: formatting 100 tracebacks costs more than the tests


class Quiet:
    """The sandbox, with ``--tb=no`` appended to every run: outcomes, canaries and reports are unchanged."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.name = sandbox.name

    def prepare(self, spec: Any, repo_dir: Path) -> Any:
        return self.sandbox.prepare(spec, repo_dir)

    def run(self, env: Any, workspace: Path, request: Any) -> Any:
        return self.sandbox.run(env, workspace, dataclasses.replace(request, tests=(*request.tests, *QUIET)))


class FixedEnv:
    """An ``EnvCache`` for ``taskforge.reward.reward``: always this already prepared environment (no lookups)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def get(self, sandbox: Any, task: Task, original: Path) -> Any:
        return self.env
