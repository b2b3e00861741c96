"""The environment of a repository: how to install it, where its tests live, what got installed.

An ``EnvSpec`` is *detected* from the repository's files (``generators/env_detect.py``); a sandbox
*prepares* it once per repository (``Sandbox.prepare``) into a ``PreparedEnv`` that every task of
that repository reuses. Neither holds any of the repository's own source code.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """How to build and test a repository. Detected, never hand-written per repo."""

    project_name: str  # distribution name (normalised), e.g. "inflection"
    python: str  # "3.11"
    install_target: str  # pip target relative to the repo, e.g. ".[tests]" ("" when not installable)
    requirements: tuple[str, ...] = ()  # extra test requirements (requirements files, tox deps, pytest plugins)
    src_roots: tuple[str, ...] = (".",)  # workspace paths put on sys.path ("src" for src-layouts)
    package_dirs: tuple[str, ...] = ()  # the project's own top-level packages/modules, workspace-relative
    test_paths: tuple[str, ...] = ("tests",)  # workspace-relative test locations given to pytest
    pytest_args: tuple[str, ...] = ()  # extra pytest args from the project's config that we must keep
    notes: tuple[str, ...] = ()  # how each field was detected (shown to the user)
    # paths a full-suite run also gives pytest that are NOT test code: the project's own modules or
    # text files collected for doctests (``--doctest-modules``/``--doctest-glob``, testpaths = ["src"])
    doctest_paths: tuple[str, ...] = ()
    # hash of the files that decide what gets installed (pyproject.toml, setup.py/cfg, requirements
    # files): part of ``key``, so two commits that declare different dependencies get two environments
    metadata_digest: str = ""
    # workspace files the test runner itself imports before any plugin or conftest, found by the profile's
    # run (a project pytest depends on: iniconfig, packaging's version.py): no task deletes anything in
    # them and every grading restores them, so no graded code runs before the grading plugin. Not part of
    # ``key``: it is learnt from the environment, after it is built
    runner_files: tuple[str, ...] = ()
    # False: the environment serves none of the project's compiled extension modules, so the project's
    # pure-Python fallbacks run (msgpack's fallback.py, simplejson's py_scanstring: uncovered while the
    # compiled module serves every test). The pure-Python variant of a source (taskforge.pipeline.variants)
    # builds its environment so, and its tasks carry this spec: every backend grades them without the modules
    compiled_extensions: bool = True
    # distributions guessed from modules the test files import unguarded at their top that nothing maps to a
    # distribution (dpath 2.2.0's ``from nose2.tools.such import helper``): the module's own name. The install
    # plan tries them in its first step only, so a wrong guess costs one failed step, never the environment
    guessed_requirements: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Content hash: equal specs share one environment (venv or image)."""
        # the default stays out of the hash: environments built before the field existed keep their key
        drop = ("notes", "runner_files") + (("compiled_extensions",) if self.compiled_extensions else ()) + \
            (("guessed_requirements",) if not self.guessed_requirements else ())
        payload = json.dumps(self.to_dict(exclude=drop), sort_keys=True).encode()
        return hashlib.sha256(payload).hexdigest()[:16]

    def to_dict(self, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
        d = asdict(self)
        for k in exclude:
            d.pop(k, None)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EnvSpec:
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()
                              if k in cls.__dataclass_fields__}
        return cls(**kw)


@dataclass(frozen=True, slots=True)
class PreparedEnv:
    """An environment a sandbox built from an ``EnvSpec``: a virtualenv path or an image tag."""

    spec: EnvSpec
    backend: str  # "local" | "docker"
    location: str  # venv directory (local) or image tag (docker)
    python_version: str  # full version actually installed, e.g. "3.11.7"
    frozen: tuple[str, ...] = ()  # `pip freeze` of the environment, the project itself excluded
    install_log: str = ""  # tail of the build log (kept also on success)
    build_seconds: float = 0.0
    extra: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec.to_dict(),
            "backend": self.backend,
            "location": self.location,
            "python_version": self.python_version,
            "frozen": list(self.frozen),
            "install_log": self.install_log,
            "build_seconds": self.build_seconds,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PreparedEnv:
        return cls(
            spec=EnvSpec.from_dict(d["spec"]),
            backend=d["backend"],
            location=d["location"],
            python_version=d["python_version"],
            frozen=tuple(d.get("frozen", ())),
            install_log=d.get("install_log", ""),
            build_seconds=float(d.get("build_seconds", 0.0)),
            extra=dict(d.get("extra", {})),
        )


def normalise_name(name: str) -> str:
    """PEP 503 normalisation of a distribution name: ``Foo_Bar.baz`` -> ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()
