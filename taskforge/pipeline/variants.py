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

A task budget goes to distinct entities first (``generators.candidates.interleave``): a source that may get
a variant runs in three ``Part``s, each a ``run_source`` pass with its share of ``max_tasks``: the main
profile's first candidate of each entity, then the variant's candidates, then the main profile's *twins*
(an entity's candidate by a second strategy). msgpack's main run alone ended on the stub/delete twins of
``Timestamp.to_bytes``, one entity for two of its ten tasks.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PURE = "+pure"  # the variant's journal folder and funnel run id
TWINS = "+twins"  # the funnel run id of the main profile's twins (they journal with the main run)


@dataclass(frozen=True, slots=True)
class Part:
    """One ``run_source`` pass over a source's candidates: which it takes, its share of tasks, where it
    journals (``journal_suffix``) and records its funnel (``run_suffix``)."""

    max_tasks: int | None
    twins: str = "all"  # "all" | "none" (an entity's first candidate only) | "only" (the others)
    exclude: frozenset[str] = frozenset()  # entities left to another part
    journal_suffix: str = ""
    run_suffix: str = ""

    @property
    def first(self) -> bool:
        """Whether this is the source's first pass (its funnel keeps the pre-rejected candidates)."""
        return not self.run_suffix

    def take(self, order: Sequence[Any]) -> list[Any]:
        """The candidates of ``order`` (interleaved) this part validates, in order."""
        kept = [c for c in order if c.entity not in self.exclude]
        if self.twins == "all":
            return kept
        seen: set[str] = set()
        firsts = set()
        for c in kept:
            if c.entity not in seen:
                firsts.add(c.candidate_id)
                seen.add(c.entity)
        return [c for c in kept if (c.candidate_id in firsts) == (self.twins == "none")]


def may_follow(env_extra: dict[str, str], enabled: bool) -> bool:
    """Whether a source's main run may be followed by its pure-Python variant (it kept compiled modules)."""
    return enabled and bool(env_extra.get("extension_modules"))


def first_part(max_tasks: int | None) -> Part:
    """The main profile's first candidate of each entity (a variant may follow)."""
    return Part(max_tasks, twins="none")


def pure_part(profile: Any, max_tasks: int | None) -> Part:
    """The variant's candidates (``profile``: the main profile), at most ``max_tasks``."""
    return Part(max_tasks, exclude=frozenset(e.qualname for e in profile.covered_entities()),
                journal_suffix=PURE, run_suffix=PURE)


def twins_part(max_tasks: int | None) -> Part:
    """The main profile's twins, after the variant."""
    return Part(max_tasks, twins="only", run_suffix=TWINS)


def left(max_tasks: int | None, *done: Any) -> int | None:
    """What is left of ``max_tasks`` after the ``SourceSummary``s ``done`` (None: no limit)."""
    return None if max_tasks is None else max(0, max_tasks - sum(d.tasks for d in done))


def merged(main: Any, more: Any) -> Any:
    """One ``SourceSummary`` for two parts of a source (candidates: the sum of what each part took)."""
    accepted: Counter[str] = Counter(main.accepted)
    accepted.update(more.accepted)
    funnel: Counter[str] = Counter(main.funnel)
    funnel.update(more.funnel)
    return dataclasses.replace(
        main, error=main.error or more.error, candidates=main.candidates + more.candidates,
        accepted=dict(accepted), funnel=dict(funnel), seconds=main.seconds + more.seconds,
        profile_seconds=main.profile_seconds + more.profile_seconds,
        test_seconds=main.test_seconds + more.test_seconds)
