"""Candidate features: entities of the project's own code that reliable tests exercise.

``propose(profile, strategies)`` returns the candidates worth validating, ranked, and a ``Rejected``
value for every entity skipped up front, with the reason (the start of the rejection funnel).

A candidate's *covering tests* are the reliable (always-passing, non-flaky) tests that execute a line
of its **body** (not just its ``def`` line), and the reliable tests of every test module whose import
uses it (``generators.import_time``: a schema class body in a test helper module). Skipped up front, and why:

- ``NO_COVERING_TESTS``: no reliable test executes the body.
- ``DUNDER_METHOD``: ``__eq__``, ``__repr__``... are used implicitly by nearly every test; deleting one
  breaks unrelated tests and the task is unfair. ``__init__`` is kept only as part of a class.
- ``TRIVIAL_BODY``: a body of one simple statement (``return self._x``): nothing to implement.
- ``TEST_ONLY_CODE``: code in the package that exists for tests (``testing``/``conftest`` modules).
- ``RUNNER_MODULE``: code in a file the test runner itself imports before any plugin or conftest
  (``EnvSpec.runner_files``: a project pytest depends on, such as iniconfig); graded code must never
  run before the grading plugin, so those files are never deleted from and every grading restores them.

Rank (higher first), recorded in ``Candidate.why``::

    rank = log2(1 + covering_tests) + log2(1 + statements) + 0.5 * log2(1 + complexity)
           - 0.75 * log2(1 + dependents)

more tests pin the behaviour down, more code makes a richer task, many dependents make it brittle.
Ties are broken by a seeded hash of the qualified name, so the order is deterministic per seed.

Costly candidates go last (``costly``, ``interleave(..., last=...)``): those whose covering tests take more
than a quarter of the suite's test time and over 30 seconds. networkx's first candidates by rank were its core
classes and modules (``Graph``, ``utils.backends``: 6,000+ covering tests, a whole suite per run): each of a
candidate's validation runs cost a full suite, for a task whose every test fails (the first took 92 s and
was rejected). A suite of under 30 seconds of tests is never reordered.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskforge.core.entities import Entity, EntityKind
from taskforge.core.outcomes import Rejected, RejectReason

COSTLY_SHARE = 0.25  # of the suite's test time, and ...
COSTLY_MIN_S = 30.0  # ... at least this many seconds of it: the candidate goes last
_TEST_SUPPORT_MODULES = frozenset({"testing", "_testing", "conftest", "tests", "test", "pytest_plugin"})


@dataclass(frozen=True, slots=True)
class Candidate:
    candidate_id: str  # f"{strategy}:{qualname}"
    strategy: str
    entity: str  # qualified name
    covering_tests: tuple[str, ...]
    rank: float
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"candidate_id": self.candidate_id, "strategy": self.strategy, "entity": self.entity,
                "covering_tests": list(self.covering_tests), "rank": self.rank, "why": self.why}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Candidate:
        return cls(d["candidate_id"], d["strategy"], d["entity"], tuple(d["covering_tests"]),
                   float(d["rank"]), d.get("why", ""))


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _tie(seed: int, qualname: str) -> float:
    digest = hashlib.sha256(f"{seed}:{qualname}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def skip_reason(entity: Entity, covering: frozenset[str],
                runner_files: frozenset[str] = frozenset()) -> RejectReason | None:
    """Why ``entity`` cannot make a fair task (None when it can)."""
    if entity.file in runner_files:
        return RejectReason.RUNNER_MODULE
    parts = entity.qualname.split(".")
    if any(p in _TEST_SUPPORT_MODULES for p in parts[:-1] if entity.kind is not EntityKind.MODULE) or (
            entity.kind is EntityKind.MODULE and parts[-1] in _TEST_SUPPORT_MODULES):
        return RejectReason.TEST_ONLY_CODE
    if entity.kind is EntityKind.METHOD and _is_dunder(parts[-1]):
        return RejectReason.DUNDER_METHOD
    if not covering:
        return RejectReason.NO_COVERING_TESTS
    if entity.kind in (EntityKind.FUNCTION, EntityKind.METHOD) and entity.statements < 2 and entity.complexity <= 1:
        return RejectReason.TRIVIAL_BODY
    return None


def covering_tests(entity: Entity, profile: Any, *, names_remain: bool = False) -> frozenset[str]:
    """Reliable tests that execute the entity's body (a module: any line of the file), and those of the
    test modules whose import uses it (module docstring; ``names_remain``: for a stub, see
    ``generators.import_time``)."""
    reliable = profile.baseline.reliable
    if entity.kind is EntityKind.MODULE:
        found = frozenset().union(*(
            profile.coverage.tests_for_lines(entity.file, e.body_start, e.body_end, among=reliable)
            for e in profile.index.in_file(entity.file) if e.kind is not EntityKind.MODULE
        )) if profile.index.in_file(entity.file) else frozenset()
    else:
        found = profile.coverage.tests_for_entity(entity, among=reliable)
    from generators.cli_tests import cli_tests

    return found | import_time_tests(entity, profile, names_remain=names_remain) | cli_tests(entity, profile)


def import_time_tests(entity: Entity, profile: Any, *, names_remain: bool = False) -> frozenset[str]:
    """Reliable tests of the test files whose import uses ``entity`` (``generators.import_time``)."""
    from generators.import_time import import_time_users

    repo = getattr(profile, "repo_dir", None)
    if repo is None or not getattr(profile.index, "test_files", ()):
        return frozenset()
    files = import_time_users(profile.index, repo, names_remain=names_remain).get(entity.qualname)
    if not files:
        return frozenset()
    return frozenset(t for t in profile.baseline.reliable if t.split("::", 1)[0] in files)


def _dependents(entity: Entity) -> int:
    return len({r.in_entity or r.file for r in entity.references if not r.is_test and r.kind != "all"})


def propose(profile: Any, strategies: Sequence[Any], seed: int = 0) -> tuple[list[Candidate], list[Rejected]]:
    """Rank the candidates of every strategy; see the module docstring. ``profile``: ``taskforge.profile.build.Profile``."""
    candidates: list[Candidate] = []
    rejected: list[Rejected] = []
    runner_files = frozenset(getattr(getattr(profile, "spec", None), "runner_files", ()) or ())
    for entity in profile.entities:
        applicable = [s for s in strategies if s.applies_to(entity)]
        if not applicable:
            continue
        every = covering_tests(entity, profile)
        reason = skip_reason(entity, every, runner_files)
        for strategy in applicable:
            cid = f"{strategy.name}:{entity.qualname}"
            covering = covering_tests(entity, profile, names_remain=True) if strategy.name == "stub" else every
            if not covering:  # only bindings of the bare name used it: nothing a stub breaks
                rejected.append(Rejected(cid, RejectReason.NO_COVERING_TESTS))
                continue
            if reason is not None:
                rejected.append(Rejected(cid, reason))
                continue
            deps = _dependents(entity)
            rank = (math.log2(1 + len(covering)) + math.log2(1 + entity.statements)
                    + 0.5 * math.log2(1 + entity.complexity) - 0.75 * math.log2(1 + deps))
            why = (f"{len(covering)} covering tests, {entity.statements} statements, "
                   f"complexity {entity.complexity}, {deps} dependents")
            candidates.append(Candidate(cid, strategy.name, entity.qualname, tuple(sorted(covering)),
                                        round(rank, 4), why))
    for strategy in strategies:  # features, compositions: candidates of their own (protocol.ProfileStrategy)
        if hasattr(strategy, "propose"):
            candidates.extend(strategy.propose(profile, seed))
    candidates.sort(key=lambda c: (-c.rank, _tie(seed, c.candidate_id)))
    return candidates, rejected


def costly(candidates: Iterable[Candidate], durations: Mapping[str, float]) -> frozenset[str]:
    """The ids of the candidates whose covering tests take more than ``COSTLY_SHARE`` of the suite's test time
    (``durations``: the baseline's, per test) and more than ``COSTLY_MIN_S`` seconds (module docstring)."""
    suite = sum(durations.values())
    limit = max(COSTLY_SHARE * suite, COSTLY_MIN_S)
    if suite <= limit:
        return frozenset()
    return frozenset(c.candidate_id for c in candidates
                     if sum(durations.get(t, 0.0) for t in c.covering_tests) > limit)


def interleave(candidates: Iterable[Candidate], strategy_order: Sequence[str],
               last: Collection[str] = frozenset()) -> list[Candidate]:
    """Round-robin over strategies (each in rank order), so a task budget covers every strategy; every
    entity's first candidate comes before any *twin* (the same entity by another strategy), so a task
    budget is spent on distinct entities first and a twin is tried only once every entity had its turn.
    The candidates named in ``last`` (``costly``) are then moved behind all others, each part in the order it had:
    the others keep the order they have without ``last``, so which twin of an entity goes first never changes.
    (Interleaving the others anew moved more-itertools' delete twins, which break the collection of its test
    file, before their stubs: 23 ``import_broken`` of 29 decided.)"""
    queues = {s: [c for c in candidates if c.strategy == s] for s in strategy_order}
    out: list[Candidate] = []
    while any(queues.values()):
        for s in strategy_order:
            if queues[s]:
                out.append(queues[s].pop(0))
    seen: set[str] = set()
    first: list[Candidate] = []
    twins: list[Candidate] = []
    for c in out:
        (twins if c.entity in seen else first).append(c)
        seen.add(c.entity)
    order = first + twins
    return [c for c in order if c.candidate_id not in last] + [c for c in order if c.candidate_id in last]
