"""The rejection funnel and per-repo statistics of the runs that wrote a dataset (``DIR/funnel.json``).

Each generation run records one ``RunFunnel`` under its ``run_id``; recording the same run again
(a resumed run) replaces its entry instead of adding to it, so counts are never doubled. The
dataset card and the HTML report read the totals from here.

    {"runs": {"<run_id>": {"source": ..., "repo": ..., "candidates": 40, "accepted": 6,
                            "rejected": {"no_covering_tests": 20, ...}, "seconds": 81.2, ...}}}
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskforge.core.errors import DatasetError
from taskforge.core.outcomes import Rejected
from taskforge.dataset.manifest import FUNNEL, write_json_atomic


@dataclass(frozen=True, slots=True)
class RunFunnel:
    run_id: str  # stable across a resume of the same run, e.g. f"{source}@{seed}"
    source: str
    repo: str
    candidates: int  # candidates proposed (accepted + rejected, unless the run was cut short)
    accepted: int
    rejected: Mapping[str, int] = field(default_factory=dict)  # RejectReason value -> count
    seconds: float = 0.0
    finished_at: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)  # stage timings, settings, ...

    @classmethod
    def from_outcomes(cls, run_id: str, source: str, repo: str, accepted: int, rejections: Iterable[Rejected],
                      *, candidates: int | None = None, seconds: float = 0.0, finished_at: str = "",
                      extra: Mapping[str, Any] | None = None) -> RunFunnel:
        reasons = Counter(r.reason.value for r in rejections)
        total = accepted + sum(reasons.values()) if candidates is None else candidates
        return cls(run_id, source, repo, total, accepted, dict(sorted(reasons.items())), seconds, finished_at,
                   dict(extra or {}))

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "source": self.source, "repo": self.repo, "candidates": self.candidates,
                "accepted": self.accepted, "rejected": dict(self.rejected), "seconds": self.seconds,
                "finished_at": self.finished_at, "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunFunnel:
        return cls(d["run_id"], d.get("source", ""), d.get("repo", ""), int(d.get("candidates", 0)),
                   int(d.get("accepted", 0)), {k: int(v) for k, v in d.get("rejected", {}).items()},
                   float(d.get("seconds", 0.0)), d.get("finished_at", ""), dict(d.get("extra", {})))


def read_funnel(root: Path) -> dict[str, RunFunnel]:
    path = Path(root) / FUNNEL
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        return {k: RunFunnel.from_dict(v) for k, v in data.get("runs", {}).items()}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DatasetError(f"{path} is unreadable ({type(exc).__name__}: {exc}); delete it, the next run "
                           "records a fresh funnel") from exc


def record_run(root: Path, run: RunFunnel) -> None:
    """Add (or replace, for a resumed run) ``run`` in ``DIR/funnel.json``; written atomically."""
    runs = read_funnel(root)
    runs[run.run_id] = run
    write_json_atomic(Path(root) / FUNNEL, {"runs": {k: runs[k].to_dict() for k in sorted(runs)}})


@dataclass(frozen=True, slots=True)
class FunnelTotals:
    candidates: int
    accepted: int
    rejected: Mapping[str, int]
    per_repo: Mapping[str, Mapping[str, Any]]  # repo -> {sources, candidates, accepted, rejected, seconds}

    @classmethod
    def of(cls, runs: Iterable[RunFunnel]) -> FunnelTotals:
        rejected: Counter[str] = Counter()
        per_repo: dict[str, dict[str, Any]] = {}
        candidates = accepted = 0
        for r in runs:
            candidates += r.candidates
            accepted += r.accepted
            rejected.update(r.rejected)
            slot = per_repo.setdefault(r.repo, {"sources": [], "candidates": 0, "accepted": 0,
                                                "rejected": Counter(), "seconds": 0.0})
            if r.source not in slot["sources"]:
                slot["sources"].append(r.source)
            slot["candidates"] += r.candidates
            slot["accepted"] += r.accepted
            slot["rejected"].update(r.rejected)
            slot["seconds"] += r.seconds
        for slot in per_repo.values():
            slot["rejected"] = dict(slot["rejected"].most_common())
        return cls(candidates, accepted, dict(rejected.most_common()), dict(sorted(per_repo.items())))
