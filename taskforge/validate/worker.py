"""What a validation worker keeps between candidates: the profile, the sandbox and the repository's one
environment, each built once per process (``functools.lru_cache``), and the reward's environment cache.

Candidates of one repository run in the same worker (process pool or Ray actor) one after another:
loading the profile, starting a warm sandbox or preparing an environment again for each would cost
more than validating most candidates.
"""

from __future__ import annotations

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
    from sandboxes.selection import make_sandbox

    box = make_sandbox(Settings.load(dict(settings_items)))
    return box.warm() if warm else box


def sandbox_for(settings: Mapping[str, Any], warm: bool = True) -> Any:
    """This worker's sandbox for ``settings`` (``warm``: runs may fork from a warm interpreter)."""
    return _sandbox(tuple(sorted((k, v) for k, v in settings.items())), warm)


@functools.lru_cache(maxsize=8)
def prepared_env(profile_dir: str, sandbox: Any) -> Any:
    """The repository's one environment in this worker: the profile's, or prepared once per sandbox."""
    profile = load_profile(profile_dir)
    if profile.env.backend == sandbox.name:
        return profile.env
    return sandbox.prepare(profile.spec, profile.repo_dir)


@functools.lru_cache(maxsize=4)
def environment_index(profile_dir: str, env_dir: str, skip: tuple[str, ...] = ()) -> Any:
    """The leak audit's reading of the environment at ``env_dir`` (or of the interpreter's standard library,
    less its folders ``skip``) for every entity of the profile's repository (``taskforge.audit.env_index``),
    built once per worker on the first audit."""
    from taskforge.audit.env_index import EnvironmentIndex

    profile = load_profile(profile_dir)
    sources: dict[str, str] = {}
    lines_of: dict[str, list[str]] = {}
    for e in profile.entities:
        if e.file not in lines_of:
            try:
                lines_of[e.file] = (profile.repo_dir / e.file).read_text(encoding="utf-8").splitlines(keepends=True)
            except (OSError, UnicodeDecodeError):
                lines_of[e.file] = []
        text = e.source_in(lines_of[e.file])  # as ``task_record.entity_source``: the index then covers the audit
        if text:
            sources[e.qualname] = text
    return EnvironmentIndex.build(Path(env_dir), sources, skip)


class FixedEnv:
    """An ``EnvCache`` for ``taskforge.reward.reward``: always this already prepared environment (no lookups)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def get(self, sandbox: Any, task: Task, original: Path) -> Any:
        return self.env
