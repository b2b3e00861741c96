"""What a grading returns: ``RewardResult`` and the ``RewardFlag`` values it may carry.

``ZEROING_FLAGS`` is the one list of flags that force the score to 0; validation reads it too.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from taskforge.reward.monitor import Finding
from taskforge.reward.monitor import flags as monitor_flags


class RewardFlag(enum.StrEnum):
    TAMPERING = "tampering"  # evidence that the patch attacked the grading run
    CANARY_FAILED = "canary_failed"  # a canary did not behave as planned (implies tampering)
    FORGED_RESULTS = "forged_results"  # records on the results channel that the runner did not write
    NO_REPORT = "no_report"  # the runner wrote no (readable) report: killed, exited early, crashed
    TIMEOUT = "timeout"  # the run passed its wall-clock limit
    PATCH_REFUSED = "patch_refused"  # escapes the repository, symlink, binary, submodule, shadowing module
    PATCH_FAILED = "patch_failed"  # the vetted patch does not apply to the broken workspace
    PROTECTED_DROPPED = "protected_dropped"  # sections touching test/test-support files were dropped
    COLLECTION_ERROR = "collection_error"  # some test file failed to collect
    MISSING_TESTS = "missing_tests"  # some FAIL_TO_PASS/PASS_TO_PASS test never reported
    SUSPICIOUS = "suspicious"  # the patch monitor found hack signatures (``RewardResult.findings``)
    GRADER_ERROR = "grader_error"  # our side failed (setup_patch, sandbox backend); not the agent's fault


ZEROING_FLAGS = frozenset({RewardFlag.TAMPERING, RewardFlag.CANARY_FAILED, RewardFlag.FORGED_RESULTS,
                           RewardFlag.NO_REPORT, RewardFlag.TIMEOUT,
                      RewardFlag.PATCH_REFUSED, RewardFlag.PATCH_FAILED, RewardFlag.GRADER_ERROR})


@dataclass(frozen=True, slots=True)
class RewardResult:
    """One grading: binary score, hidden-test pass fraction, per-test outcomes, timings, flags."""

    instance_id: str
    score: float  # 1.0 iff every FAIL_TO_PASS and PASS_TO_PASS test passed and no zeroing flag is set
    fraction: float  # FAIL_TO_PASS tests passed / FAIL_TO_PASS tests (0.0 whenever score is zeroed by a flag)
    outcomes: Mapping[str, str] = field(default_factory=dict)  # node id -> outcome (canaries excluded)
    durations: Mapping[str, float] = field(default_factory=dict)  # node id -> seconds
    timings: Mapping[str, float] = field(default_factory=dict)  # phase -> seconds
    flags: tuple[RewardFlag, ...] = ()
    detail: str = ""  # why the score was zeroed, one line
    pass_to_pass_fraction: float = 0.0
    findings: tuple[Finding, ...] = ()  # the patch monitor's hits, with evidence (``taskforge.reward.monitor``)
    # a probe grading's confirmed sealed sites: node id -> site ids (``taskforge.reward.seals``; validation)
    seals: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def flag_names(self) -> tuple[str, ...]:
        """The flags as strings, plus one ``suspicious:<rule>`` per rule the monitor hit."""
        return (*(f.value for f in self.flags), *monitor_flags(self.findings))

    def to_dict(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "reward": self.score, "fraction": self.fraction,
                "pass_to_pass_fraction": self.pass_to_pass_fraction, "flags": list(self.flag_names),
                "findings": [f.to_dict() for f in self.findings],
                "detail": self.detail, "outcomes": dict(self.outcomes), "durations": dict(self.durations),
                "timings": dict(self.timings), **({"seals": {k: list(v) for k, v in self.seals.items()}}
                                                   if self.seals else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RewardResult:
        return cls(str(d["instance_id"]), float(d["reward"]), float(d["fraction"]), dict(d.get("outcomes", {})),
                   dict(d.get("durations", {})), dict(d.get("timings", {})), tuple(RewardFlag(f) for f in d.get("flags", ()) if not str(f).startswith("suspicious:")),
                   str(d.get("detail", "")), float(d.get("pass_to_pass_fraction", 0.0)),
                   tuple(Finding.from_dict(f) for f in d.get("findings", ())),
                   {str(k): tuple(v) for k, v in dict(d.get("seals", {})).items()})
