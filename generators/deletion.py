"""``Deletion``: what a deletion strategy produced for one candidate feature (a frozen value).

The file maps hold the full text of every touched file before and after (``None`` = the file is
absent), so the broken workspace is the original plus ``files_after``, and the gold patch is
``taskforge.core.patches.diff(files_after, files_before)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from taskforge.core.patches import diff, patch_paths


@dataclass(frozen=True, slots=True)
class Deletion:
    strategy: str  # "stub" | "delete" | "module"
    target: str  # qualified name of the candidate entity
    deleted: tuple[str, ...]  # every entity removed (or stubbed), target first
    files_before: Mapping[str, str | None]
    files_after: Mapping[str, str | None]
    lines_deleted: int  # lines removed from the non-test code (diff "-" lines)
    statements_deleted: int  # statements of the deleted bodies
    complexity: int  # summed cyclomatic complexity of the deleted code
    fan_in: int  # uses of the deleted entities from the rest of the project's code (imports excluded)
    fan_out: int  # distinct names the deleted code calls
    dependents: tuple[str, ...] = ()  # entities deleted because they used the target (recorded)
    helpers: tuple[str, ...] = ()  # private helpers deleted because only the feature used them
    # users of the target too big to delete, stubbed instead (``generators.dependent_stubs``): their names and
    # signatures stay, their bodies raise NotImplementedError and are part of the task
    stubbed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def files_touched(self) -> int:
        return sum(1 for k in self.files_after if self.files_after[k] != self.files_before.get(k))

    @property
    def removed(self) -> tuple[str, ...]:
        """The entities whose *names* are gone from the broken workspace (a stub keeps every name)."""
        if self.strategy == "stub":
            return ()
        kept = set(self.stubbed)
        return tuple(q for q in self.deleted if q not in kept)

    @property
    def setup_diff(self) -> str:
        """Original -> broken, for the touched files."""
        return diff(self.files_before, self.files_after)

    @property
    def gold_diff(self) -> str:
        """Broken -> original: the gold patch of the feature."""
        return diff(self.files_after, self.files_before)

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy, "target": self.target, "deleted": list(self.deleted),
            "files_before": dict(self.files_before), "files_after": dict(self.files_after),
            "lines_deleted": self.lines_deleted, "statements_deleted": self.statements_deleted,
            "complexity": self.complexity, "fan_in": self.fan_in, "fan_out": self.fan_out,
            "dependents": list(self.dependents), "helpers": list(self.helpers), "stubbed": list(self.stubbed), "notes": list(self.notes),
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Deletion:
        return cls(
            strategy=d["strategy"], target=d["target"], deleted=tuple(d["deleted"]),
            files_before=dict(d["files_before"]), files_after=dict(d["files_after"]),
            lines_deleted=int(d["lines_deleted"]), statements_deleted=int(d["statements_deleted"]),
            complexity=int(d["complexity"]), fan_in=int(d["fan_in"]), fan_out=int(d["fan_out"]),
            dependents=tuple(d.get("dependents", ())), helpers=tuple(d.get("helpers", ())),
            stubbed=tuple(d.get("stubbed", ())), notes=tuple(d.get("notes", ())), extra=dict(d.get("extra", {})),
        )


def removed_lines(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> int:
    """Lines a patch from ``before`` to ``after`` removes (``-`` lines of the unified diff)."""
    text = diff(before, after)
    return sum(1 for line in text.splitlines() if line.startswith("-") and not line.startswith("--- "))


__all__ = ["Deletion", "patch_paths", "removed_lines"]
