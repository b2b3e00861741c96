"""The steps a sandbox tries, in order, to install an environment, and why each one that failed failed.

A project's declared test requirements are the best guess of what its suite needs, but a lock compiled
for another Python or a pin that no longer exists on the index makes the whole install fail. Instead of
stopping there, each sandbox tries, in order, until one installs:

0. ``guessed``, only when detection guessed distributions from unmapped test imports
   (``EnvSpec.guessed_requirements``): step 1 plus the guesses, so a wrong guess costs this step alone;
1. ``pinned``: the detected requirements as declared + the install target (``.[tests]``);
2. ``unpinned``: the same names without version pins (extras and markers kept) + the install target;
3. ``extras``: the install target alone (its test extras bring their own dependencies);
4. ``extras-N``: the unpinned requirements + the target with only its first N extras, N going down from
   one less than it names to 1: ``env_detect`` lists the test extras first and the optional ones it
   adds (an extra the tests import, an extra backing an optional feature of the package, such as
   networkx's ``extra`` with pygraphviz, which needs graphviz headers to build) after them, so an extra
   that cannot be installed is dropped before the test extras are;
5. ``plain``: the project without extras, and just the test tooling.

A step identical to an earlier one is skipped. Every failure is kept (``InstallAttempt``) and reported in
the environment's notes and build log, so the user sees which set was installed and why the others were
not. Standard library and ``taskforge.core`` only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from taskforge.core.environment import EnvSpec

_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?)\s*(?:[<>=!~]=?|===)[^;]*(;.*)?$")


@dataclass(frozen=True, slots=True)
class InstallStep:
    """One way to install the environment: ``requirements`` plus ``install_target`` (may be "")."""

    label: str
    requirements: tuple[str, ...]
    install_target: str


@dataclass(frozen=True, slots=True)
class InstallAttempt:
    """A step that failed and the one line that says why."""

    step: InstallStep
    why: str

    def note(self) -> str:
        return f"install: step {self.step.label!r} failed: {self.why}"


def unpin(requirement: str) -> str:
    """``attrs==24.3.0 ; python_version >= '3.8'`` -> ``attrs ; python_version >= '3.8'``."""
    m = _PIN.match(requirement)
    if not m:
        return requirement.strip()
    return m.group(1) + (f" {m.group(2).strip()}" if m.group(2) else "")


def install_steps(spec: EnvSpec, tooling: tuple[str, ...]) -> list[InstallStep]:
    """The steps for ``spec`` in order (see the module docstring); ``tooling`` is added to every one."""
    target = spec.install_target
    plain, _, extras = target.partition("[")
    names = [e.strip() for e in extras.rstrip("]").split(",") if e.strip()]
    unpinned = tuple(dict.fromkeys((*(unpin(r) for r in spec.requirements), *tooling)))
    guessed = (InstallStep("guessed", tuple(dict.fromkeys((*spec.requirements, *spec.guessed_requirements,
                                                           *tooling))), target),) if spec.guessed_requirements else ()
    steps = [
        *guessed,
        InstallStep("pinned", (*spec.requirements, *tooling), target),
        InstallStep("unpinned", unpinned, target),
        InstallStep("extras", tooling, target),
        *(InstallStep(f"extras-{n}", unpinned, f"{plain}[{','.join(names[:n])}]")
          for n in range(len(names) - 1, 0, -1)),
        InstallStep("plain", tooling, plain),
    ]
    out: list[InstallStep] = []
    for step in steps:
        if not any(s.requirements == step.requirements and s.install_target == step.install_target for s in out):
            out.append(step)
    return out


def fallback_notes(attempts: list[InstallAttempt], used: InstallStep) -> tuple[str, ...]:
    """Notes for the environment: each failed step, then which one was installed (empty when the first)."""
    if not attempts:
        return ()
    shown = " ".join((*used.requirements, used.install_target)).strip()
    return (*(a.note() for a in attempts), f"install: fell back to step {used.label!r} ({shown})")
