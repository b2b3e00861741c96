"""Per-candidate outcomes are values, not exceptions: ``Accepted | Rejected(reason)``.

The counts of each ``RejectReason`` over a run form the rejection funnel that the CLI prints,
the dataset card and the HTML report show.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from taskforge.core.task import Task


class RejectReason(enum.StrEnum):
    NO_COVERING_TESTS = "no_covering_tests"
    TRIVIAL_BODY = "trivial_body"
    DUNDER_METHOD = "dunder_method"
    TEST_ONLY_CODE = "test_only_code"
    RUNNER_MODULE = "runner_module"  # in a file pytest itself imports before any plugin (EnvSpec.runner_files)
    TRANSFORM_FAILED = "transform_failed"  # the codemod cannot apply (e.g. dependents we may not delete)
    DEPENDENTS_REMAIN = "dependents_remain"
    IMPORT_BROKEN = "import_broken"  # broken workspace does not import / collect
    SUITE_RED_AFTER_DELETION = "suite_red_after_deletion"  # some PASS_TO_PASS test fails
    NO_FAIL_TO_PASS = "no_fail_to_pass"  # no covering test fails once the feature is gone
    NO_PASS_TO_PASS = "no_pass_to_pass"
    F2P_DID_NOT_FAIL = "f2p_did_not_fail"  # with the test patch, a FAIL_TO_PASS test still passes
    EMPTY_PATCH_FLAGGED = "empty_patch_flagged"  # the empty patch's grading tripped an integrity check (a
    #                                              canary, the grading plugin) with every test as expected
    GOLD_FAILED = "gold_failed"  # the gold patch does not make everything pass
    UNSTABLE = "unstable"  # outcomes differ across repeats
    LEAK_FOUND = "leak_found"
    CHEATABLE = "cheatable"  # a cheap stand-in for the deleted code passes the hidden tests (the battery)
    WEAKLY_GUARDED = "weakly_guarded"  # a forger that reads the hidden files would pass gradings too often
    #                                    (no FAIL_TO_PASS test with an expected literal: Settings.max_forge_chance)
    TIMEOUT = "timeout"
    DUPLICATE = "duplicate"
    UNDERSPECIFIED = "underspecified"  # the hidden tests check values nothing the agent sees determines
    INTERNAL_ERROR = "internal_error"  # a bug of ours; carries the exception text as detail


@dataclass(frozen=True, slots=True)
class Rejected:
    candidate_id: str
    reason: RejectReason
    detail: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"candidate_id": self.candidate_id, "reason": self.reason.value, "detail": self.detail,
                "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Rejected:
        return cls(d["candidate_id"], RejectReason(d["reason"]), d.get("detail", ""), float(d.get("seconds", 0.0)))


@dataclass(frozen=True, slots=True)
class Accepted:
    """A candidate that held the whole validation contract: it is a task."""

    task: Task


CandidateOutcome = Accepted | Rejected
