"""A task: one deleted feature of one repository, with everything needed to grade a solution.

``Task`` is the value every stage after generation reads: the dataset writer turns it into a parquet
row (``taskforge.dataset``), the reward path grades patches against it, the RL loop samples it.
Nested records are frozen too; dicts exist only at the JSON/parquet edge (``to_dict``/``from_dict``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from taskforge.core.environment import EnvSpec


@dataclass(frozen=True, slots=True)
class Difficulty:
    """Static difficulty features and the scalar score (formula: ``generators/difficulty.py``)."""

    tier: int  # 0 stub, 1 delete, 2 module
    lines_deleted: int
    statements_deleted: int
    entities_deleted: int
    complexity: int  # summed cyclomatic complexity of the deleted code
    fan_in: int  # references to the deleted entities from remaining non-test code
    fan_out: int  # distinct names the deleted code calls
    files_touched: int
    fail_to_pass: int
    score: float  # in [0, 1]; higher is harder

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Difficulty:
        return cls(**{f: d[f] for f in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class ValidationRun:
    """One sandbox run made while validating: which check, which repeat, outcome counts, time."""

    check: str  # "p2p_broken" | "f2p_original" | "f2p_broken" | "gold" | ...
    repeat: int
    passed: bool
    outcomes: Mapping[str, str]  # nodeid -> outcome value
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "repeat": self.repeat, "passed": self.passed,
                "outcomes": dict(self.outcomes), "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ValidationRun:
        return cls(d["check"], int(d["repeat"]), bool(d["passed"]), dict(d.get("outcomes", {})),
                   float(d.get("seconds", 0.0)))


@dataclass(frozen=True, slots=True)
class LeakHit:
    channel: str  # "workspace" | "git" | "environment" | ...
    path: str
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return {"channel": self.channel, "path": self.path, "evidence": self.evidence}


@dataclass(frozen=True, slots=True)
class AuditResult:
    channels: tuple[str, ...] = ()
    hits: tuple[LeakHit, ...] = ()
    fingerprints: int = 0
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.hits

    def to_dict(self) -> dict[str, Any]:
        return {"channels": list(self.channels), "hits": [h.to_dict() for h in self.hits],
                "fingerprints": self.fingerprints, "seconds": self.seconds, "passed": self.passed}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AuditResult:
        return cls(tuple(d.get("channels", ())), tuple(LeakHit(**h) for h in d.get("hits", ())),
                   int(d.get("fingerprints", 0)), float(d.get("seconds", 0.0)))


@dataclass(frozen=True, slots=True)
class Task:
    instance_id: str  # deterministic: f"{repo_slug}__{strategy}__{entity}-{hash8}"
    repo: str  # repository name, e.g. "inflection"
    source: str  # what was mined: a path, a git URL or "pypi:inflection==0.5.1"
    base_commit: str
    version: str  # the repository's version (sdist version, tag or short sha)
    created_at: str  # ISO 8601 UTC
    strategy: str  # "stub" | "delete" | "module"
    entities: tuple[str, ...]  # qualified names deleted
    setup_patch: str  # original -> broken workspace (feature removed, hidden tests removed)
    patch: str  # gold: broken workspace -> original, non-test files only
    test_patch: str  # restores the hidden tests
    problem_statement: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    env_spec: EnvSpec
    difficulty: Difficulty
    env_frozen: tuple[str, ...] = ()  # pip freeze of the environment the task was validated in
    image_name: str = ""  # environment image tag (docker) or "" (local)
    validation: tuple[ValidationRun, ...] = ()
    audit: AuditResult = field(default_factory=AuditResult)
    provenance: Mapping[str, Any] = field(default_factory=dict)  # taskforge version, generator, params, seed, timings

    @property
    def content_hash(self) -> str:
        h = hashlib.sha256()
        for part in (self.repo, self.base_commit, self.setup_patch, self.patch, self.test_patch):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:16]
