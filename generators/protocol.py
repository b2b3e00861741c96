"""The ``Strategy`` seam (the ``Generator`` of the design): one feature-deletion strategy per module.

Side-effect free: only the protocol. Implementations: ``generators.strategy_stub.StubStrategy``
(tier 0), ``generators.strategy_delete.DeleteStrategy`` (tier 1), ``generators.strategy_module.
ModuleStrategy`` (tier 2), and two ``ProfileStrategy``s whose candidates are not single entities:
``generators.strategy_feature.FeatureStrategy`` (tier 3) and ``generators.strategy_compose.
ComposeStrategy`` (tier 2 + k), registered by name in ``generators.registry``. ``delete`` never raises for a
bad candidate: it returns ``Rejected``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from taskforge.core.entities import Entity
from taskforge.core.outcomes import Rejected

if TYPE_CHECKING:
    from generators.candidates import Candidate
    from generators.deletion import Deletion
    from generators.static_index import StaticIndex


@runtime_checkable
class Strategy(Protocol):
    name: str  # "stub" | "delete" | "module"
    tier: int  # 0 easiest

    def applies_to(self, entity: Entity) -> bool:
        """Cheap, static: whether this strategy can even try ``entity``."""
        ...

    def delete(self, entity: Entity, index: StaticIndex, repo_root: Path) -> Deletion | Rejected:
        """Remove the feature from the files under ``repo_root`` (read, never written)."""
        ...


@runtime_checkable
class ProfileStrategy(Strategy, Protocol):
    """A strategy whose candidates are not single entities (features, compositions): it proposes its own
    candidates from the whole profile and deletes a candidate, not an entity.

    ``generators.candidates.propose`` adds what ``propose`` returns; validation calls ``delete_candidate``
    instead of ``delete``. ``profile`` is a ``taskforge.profile.build.Profile``.
    """

    def propose(self, profile: Any, seed: int = 0) -> list[Candidate]:
        ...

    def delete_candidate(self, candidate: Candidate, profile: Any) -> Deletion | Rejected:
        ...
