"""The distributions the test runner itself loads, read from an environment's installed metadata.

pytest imports pluggy, iniconfig and packaging (and its plugins their own dependencies) before any test
runs, and the runner imports coverage. A project that is one of them cannot be tested by deletion with
this runner: the runner would import the workspace copy, so every deleted entity breaks pytest itself
and no candidate can ever be accepted (pluggy 1.7.0: 0 tasks from 232 candidates, exit 0, no warning).
``runner_distributions`` computes that set from the environment (``importlib.metadata`` of ``pytest``,
``coverage`` and their requirements, transitively, among what is installed, plus every installed
``pytest11`` plugin itself); ``refusal`` turns a hit into the one-line reason the sandbox raises. The docker
sandbox has no installed metadata on the host: it computes the same chains (``runner_chain``) from the
``requires_dist`` of pip's installation report in its resolve container, before it builds an image.
Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path

from taskforge.core.environment import normalise_name

RUNNER_ROOTS = ("pytest", "coverage")
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def runner_distributions(site_dirs: Iterable[Path]) -> dict[str, str]:
    """Normalised name -> the chain that pulls it in (``"pytest -> pluggy"``), for what is installed."""
    dists = {normalise_name(d.metadata["Name"] or ""): d
             for d in metadata.distributions(path=[str(p) for p in site_dirs]) if d.metadata["Name"]}
    plugins = [name for name, dist in dists.items() if any(ep.group == "pytest11" for ep in dist.entry_points)]
    return runner_chain({name: list(dist.requires or ()) for name, dist in dists.items()}, plugins)


def runner_chain(requires: Mapping[str, Sequence[str]], plugins: Iterable[str] = ()) -> dict[str, str]:
    """Normalised name -> chain, from each installed distribution's ``Requires-Dist`` lines.

    ``requires`` maps every installed distribution to its requirement strings (installed metadata, or
    the ``metadata.requires_dist`` of pip's installation report in the docker resolve container).
    """
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
            if "extra ==" in req.replace('"', "'").replace("extra==", "extra =="):
                continue  # only with an extra the runner does not ask for
            m = _NAME.match(req)
            dep = normalise_name(m.group(1)) if m else ""
            if dep in dists and dep not in chain:
                chain[dep] = f"{chain[name]} -> {dep}"
                todo.append(dep)
    return chain


def refusal(project: str, site_dirs: Iterable[Path]) -> str:
    """Why ``project`` cannot be tested with this runner ("" when it can)."""
    return refusal_in(project, runner_distributions(site_dirs))


def refusal_in(project: str, chains: Mapping[str, str]) -> str:
    """``refusal`` for chains already computed (``runner_chain``)."""
    name = normalise_name(project)
    chain = chains.get(name)
    if not chain or (chain == name and name not in RUNNER_ROOTS):
        return ""  # a pytest plugin of its own (hypothesis, anyio): its tests load it; most deletions work
    return (f"{project} is imported by the test runner itself ({chain}): every deletion would break pytest, "
            "not the project's tests, so no task could be validated; taskforge does not generate tasks from "
            "the test runner's own dependencies")
