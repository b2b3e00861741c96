"""The distributions the test runner itself loads, read from an environment's installed metadata.

pytest imports pluggy, iniconfig, pygments and packaging (and its plugins their own dependencies), and the
runner imports coverage. ``runner_distributions`` computes that set from the environment
(``importlib.metadata`` of ``pytest``, ``coverage`` and their requirements, transitively, among what is
installed, plus every installed ``pytest11`` plugin itself). What it means for a project in it:

- ``pytest``, ``coverage`` and ``pluggy`` are **refused** (``refusal``, the one-line reason the sandbox
  raises): they are the machinery that runs and watches the graded tests (pluggy's hook calling is what the
  grading plugin's integrity checks watch), so a workspace copy of them can neither be deleted from nor be
  graded (pluggy 1.7.0 before this rule: 0 tasks from 232 candidates, exit 0, no warning);
- any other dependency of theirs (iniconfig, packaging, pygments) is tested from its workspace copy, which
  pytest then imports too: the sandbox marks the environment with the chain (``runner_dependency``), and the
  profile's run records which workspace files pytest had imported before loading plugins and conftests
  (``EnvSpec.runner_files``: iniconfig's whole package, packaging's ``version.py``). Nothing in those
  files is deleted, every grading restores them, so no graded code runs before the grading plugin, and
  a deletion elsewhere that still breaks pytest is rejected by validation like any broken import;
- a pytest plugin of its own (pytest-mock, hypothesis): its tests load it; nothing changes.

The docker
sandbox has no installed metadata on the host: it computes the same chains (``runner_chain``) from the
``requires_dist`` of pip's installation report in its resolve container, before it builds an image.
A requirement's environment marker is evaluated for the interpreter that runs the tests (Linux, its Python
version): pytest's ``exceptiongroup; python_version < "3.11"`` and ``colorama; sys_platform == "win32"`` are
not imported by a pytest on Linux under Python 3.11, so exceptiongroup and colorama are testable there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path

from packaging.markers import (
    InvalidMarker,
    UndefinedComparison,
    UndefinedEnvironmentName,
    default_environment,
)
from packaging.requirements import InvalidRequirement, Requirement

from taskforge.core.environment import normalise_name

RUNNER_ROOTS = ("pytest", "coverage")
MACHINERY = frozenset({*RUNNER_ROOTS, "pluggy"})  # refused: what runs and watches the graded tests
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def runner_distributions(site_dirs: Iterable[Path], python_version: str = "") -> dict[str, str]:
    """Normalised name -> the chain that pulls it in (``"pytest -> pluggy"``), for what is installed."""
    dists = {normalise_name(d.metadata["Name"] or ""): d
             for d in metadata.distributions(path=[str(p) for p in site_dirs]) if d.metadata["Name"]}
    plugins = [name for name, dist in dists.items() if any(ep.group == "pytest11" for ep in dist.entry_points)]
    return runner_chain({name: list(dist.requires or ()) for name, dist in dists.items()}, plugins,
                        python_version=python_version)


def runner_chain(requires: Mapping[str, Sequence[str]], plugins: Iterable[str] = (), *,
                 python_version: str = "") -> dict[str, str]:
    """Normalised name -> chain, from each installed distribution's ``Requires-Dist`` lines.

    ``requires`` maps every installed distribution to its requirement strings (installed metadata, or
    the ``metadata.requires_dist`` of pip's installation report in the docker resolve container).
    ``python_version`` ("3.11.7"): the interpreter the markers are evaluated for (default: this one).
    """
    marker_env = _marker_environment(python_version)
    dists = {normalise_name(k): v for k, v in requires.items()}
    roots = [r for r in RUNNER_ROOTS if r in dists]
    chain: dict[str, str] = {r: r for r in roots}
    for name in plugins:
        name = normalise_name(name)
        if name not in chain:
            # a plugin pytest loads at start-up; its requirements are not followed: plugins import their
            # package lazily (hypothesis's plugin imports hypothesis, and so attrs, only when a test uses it),
            # so a deletion in attrs breaks attrs' own hypothesis tests, never the runner
            chain[name] = name
    todo = list(roots)
    while todo:
        name = todo.pop()
        for req in dists[name] or ():
            dep = _required_name(req, marker_env)
            if dep in dists and dep not in chain:
                chain[dep] = f"{chain[name]} -> {dep}"
                todo.append(dep)
    return chain


def _marker_environment(python_version: str) -> dict[str, str]:
    env: dict[str, str] = {**{k: str(v) for k, v in default_environment().items()}, "extra": ""}
    if python_version:
        env.update(python_full_version=python_version, python_version=".".join(python_version.split(".")[:2]))
    return env


def _required_name(req: str, marker_env: Mapping[str, str]) -> str:
    """The normalised distribution ``req`` names when it applies to ``marker_env``, else ""."""
    try:
        parsed = Requirement(req)
    except InvalidRequirement:
        if "extra ==" in req.replace('"', "'").replace("extra==", "extra =="):
            return ""  # only with an extra the runner does not ask for
        m = _NAME.match(req)
        return normalise_name(m.group(1)) if m else ""
    if parsed.marker is not None:
        try:
            if not parsed.marker.evaluate(dict(marker_env)):
                return ""  # an extra the runner does not ask for, another platform or Python
        except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            pass  # a marker we cannot decide: assume it applies (the cautious side)
    return normalise_name(parsed.name)


def refusal(project: str, site_dirs: Iterable[Path], python_version: str = "") -> str:
    """Why ``project`` cannot be tested with this runner ("" when it can)."""
    return refusal_in(project, runner_distributions(site_dirs, python_version))


def refusal_in(project: str, chains: Mapping[str, str]) -> str:
    """``refusal`` for chains already computed (``runner_chain``)."""
    name = normalise_name(project)
    chain = chains.get(name)
    if not chain or name not in MACHINERY:
        return ""  # a plugin of its own, or a dependency pytest imports (module docstring)
    return (f"{project} is part of the test runner itself ({chain}): it runs and watches the graded tests, so "
            "a workspace copy of it can be neither deleted from nor graded; taskforge does not generate tasks "
            "from pytest, pluggy or coverage")


def runner_dependency(project: str, chains: Mapping[str, str]) -> str:
    """The chain through which the runner imports ``project`` ("pytest -> iniconfig"), when it does and the
    project is neither refused nor a plugin of its own; "" otherwise."""
    name = normalise_name(project)
    chain = chains.get(name, "")
    return chain if chain and chain != name and name not in MACHINERY else ""
