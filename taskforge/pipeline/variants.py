"""The pure-Python variant of a source: tasks from the fallbacks its compiled extension modules hide.

A project that ships a compiled module *and* a pure-Python fallback for it (msgpack's ``_cmsgpack`` and
``fallback.py``, simplejson's ``_speedups`` and ``py_scanstring``) runs its suite on the compiled path
wherever the module is built, so the fallback's functions are covered by no test and yield no task: 83
``no_covering_tests`` candidates in msgpack 1.2.4, 7 tasks where its suite could give dozens. The
projects' own CI runs the suite a second time without the module (``MSGPACK_PUREPYTHON=1``) for that
reason.

When a source's environment kept compiled modules (``PreparedEnv.extra["extension_modules"]``) and the
source gave fewer tasks than asked, ``generate`` profiles it once more in an environment that serves none
of them (``EnvSpec.compiled_extensions = False``: every import of one fails, so every fallback runs) and
validates the candidates that only this variant covers. Their tasks carry that spec, so every backend
(local venv, docker image, Harbor export) grades them without the compiled modules, as they were
validated. Their workspace goes without the project's native sources (``sandboxes.extensions.native_sources``:
the setup patch removes them, the gold patch does not bring them back): with the C source at hand, a patch
that left the stub and built the compiled path again at import scored 1.0 on the fallback's task.

Only candidates whose entity the main profile does not cover are taken: an entity both cover is the main
run's to decide, so no task is made twice and no rejection is retried.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SUFFIX = "+pure"  # of the variant's journal folder and funnel run id


@dataclass(frozen=True, slots=True)
class Variant:
    """What a variant's ``run_source`` may do: the entities it must leave alone and its share of tasks."""

    covered_by_main: frozenset[str]
    max_tasks: int | None
    suffix: str = SUFFIX

    def keep(self, candidates: Iterable[Any]) -> list[Any]:
        return [c for c in candidates if c.entity not in self.covered_by_main]


def wanted(env_extra: dict[str, str], tasks: int, max_tasks: int | None, enabled: bool) -> bool:
    """Whether a source that gave ``tasks`` tasks gets its pure-Python variant."""
    return enabled and bool(env_extra.get("extension_modules")) and (max_tasks is None or tasks < max_tasks)


def for_main(profile: Any, tasks: int, max_tasks: int | None) -> Variant:
    """The variant of a source whose main run gave ``tasks`` tasks (``profile``: its main profile)."""
    return Variant(frozenset(e.qualname for e in profile.covered_entities()),
                   None if max_tasks is None else max(0, max_tasks - tasks))


def merged(main: Any, variant: Any) -> Any:
    """One ``SourceSummary`` for a source and its variant (the variant's candidates counted once, its own)."""
    accepted: Counter[str] = Counter(main.accepted)
    accepted.update(variant.accepted)
    funnel: Counter[str] = Counter(main.funnel)
    funnel.update(variant.funnel)
    return dataclasses.replace(
        main, error=main.error or variant.error, candidates=main.candidates + variant.candidates,
        accepted=dict(accepted), funnel=dict(funnel), seconds=main.seconds + variant.seconds,
        profile_seconds=main.profile_seconds + variant.profile_seconds,
        test_seconds=main.test_seconds + variant.test_seconds)
