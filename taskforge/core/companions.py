"""Tests a run takes along, ungraded: the baseline's skipped tests beside the requested ones. Stdlib only.

A run that selects tests leaves out the ones the baseline skipped (they are neither FAIL_TO_PASS nor
PASS_TO_PASS). Yet a skipped test runs its body up to the skip, and a test after it may rely on what that
body did. wcmatch 12.0.4's ``TestGlobCornerCaseMarked::test_glob_cases`` runs a table of cases in order, and
its ``Options(...)`` rows set class attributes (``absolute``, ``cwd_temp``...) and then call
``pytest.skip("Change Options")``: without them the cases after them glob the wrong paths. The profile's
grading check, which selects the reliable tests, dropped 319 of its 3,169 tests as "failing only under the
grading harness".

``companions(skipped, tests)`` gives the skipped tests that share a parent (their class, or their module for
module-level tests) with one of ``tests``; every run that selects tests requests them too (validation's runs,
every grading, the exported Harbor verifier), and reads only its own tests' outcomes. The runner keeps
collection order, so each companion runs where it ran in the baseline.
"""

from __future__ import annotations

from collections.abc import Iterable


def parent(nodeid: str) -> str:
    """The node id of what collects ``nodeid``: its class, or its file for a module-level test."""
    return nodeid.split("[", 1)[0].rpartition("::")[0]


def companions(skipped: Iterable[str], tests: Iterable[str]) -> tuple[str, ...]:
    """The ids of ``skipped`` outside ``tests`` whose parent is the parent of one of ``tests``, sorted."""
    wanted = set(tests)
    parents = {parent(n) for n in wanted} - {""}
    return tuple(sorted(n for n in set(skipped) if n not in wanted and parent(n) in parents))


__all__ = ["companions", "parent"]
