"""Strategy ``feature`` (tier 3): delete the code one group of related tests reaches, across files.

The feature of a test group (a test class or a test module) is computed by
``generators.feature_groups`` from the per-test coverage map and the static index: the entities only
that group's tests execute, closed so that the remaining code still imports and runs, with the private
helpers only they used. The deletion removes them all with libcst exactly as ``delete`` removes one
entity (definitions with their decorators, imports and re-exports of them elsewhere, ``__all__``
entries, then the imports the removal made unused); validation hides the group's tests that fail.

Its candidates are features, not entities: ``propose(profile)`` lists them (within the settings'
``feature_*`` bounds) and ``delete_candidate`` recomputes the feature from the candidate's group key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from generators.candidates import Candidate
from generators.deletion import Deletion
from generators.deletion_build import build
from generators.feature_groups import FeatureBounds, FeatureIndex, feature_candidates
from generators.static_index import StaticIndex
from generators.strategy_delete import deletion_edits
from taskforge.core.entities import Entity
from taskforge.core.outcomes import Rejected, RejectReason

_CACHE: dict[int, tuple[Any, FeatureIndex]] = {}


def feature_index(profile: Any) -> FeatureIndex:
    """The profile's ``FeatureIndex``, built once per profile object in this process."""
    hit = _CACHE.get(id(profile))
    if hit is not None and hit[0] is profile:
        return hit[1]
    if len(_CACHE) >= 4:
        _CACHE.pop(next(iter(_CACHE)))
    fidx = FeatureIndex(profile)
    _CACHE[id(profile)] = (profile, fidx)
    return fidx


class FeatureStrategy:
    name = "feature"
    tier = 3

    def __init__(self, bounds: FeatureBounds | None = None) -> None:
        self.bounds = bounds

    def applies_to(self, entity: Entity) -> bool:
        return False  # candidates are features (``propose``), never single entities

    def delete(self, entity: Entity, index: StaticIndex, repo_root: Path) -> Deletion | Rejected:
        return Rejected(f"feature:{entity.qualname}", RejectReason.TRANSFORM_FAILED,
                        "the feature strategy deletes features of a profile: call delete_candidate")

    def propose(self, profile: Any, seed: int = 0) -> list[Candidate]:
        bounds = self.bounds
        if bounds is None:
            from taskforge.core.settings import Settings

            bounds = FeatureBounds.from_settings(Settings.load())
        return feature_candidates(feature_index(profile), bounds, self.name)

    def delete_candidate(self, candidate: Candidate, profile: Any) -> Deletion | Rejected:
        cid = candidate.candidate_id
        key = cid.split(":", 1)[1] if ":" in cid else cid
        feature = feature_index(profile).feature(key)
        if feature is None:
            return Rejected(cid, RejectReason.NO_COVERING_TESTS, f"test group {key} reaches no code of its own")
        index = profile.index
        entities = [index.entity(q) for q in feature.entities]
        edits = deletion_edits(entities, index)
        notes = [f"feature of {key}: {len(feature.interface)} entities over {len(feature.files)} files"]
        deletion = build(self.name, index.entity(feature.anchor), list(feature.entities), index, profile.repo_dir,
                         edits, helpers=feature.helpers, notes=notes, candidate_id=cid)
        if isinstance(deletion, Rejected):
            return deletion
        return _with_extra(deletion, {"feature_key": key, "interface": list(feature.interface)})


def _with_extra(deletion: Deletion, extra: dict[str, Any]) -> Deletion:
    import dataclasses

    return dataclasses.replace(deletion, extra={**deletion.extra, **extra})
