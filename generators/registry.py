"""The strategies by name: ``name -> "module:Class"``, imported only when asked for.

To add a strategy, write ``generators/strategy_<name>.py`` with a class that satisfies
``generators.protocol.Strategy`` and add one line to ``STRATEGIES``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from generators.protocol import Strategy
from taskforge.core.errors import ConfigError

STRATEGIES: Mapping[str, str] = {
    "stub": "generators.strategy_stub:StubStrategy",
    "delete": "generators.strategy_delete:DeleteStrategy",
    "module": "generators.strategy_module:ModuleStrategy",
    "feature": "generators.strategy_feature:FeatureStrategy",
    "compose": "generators.strategy_compose:ComposeStrategy",
}

# What ``taskforge generate`` runs unless told otherwise; the harder tiers (``feature``; ``compose`` via
# ``taskforge compose``) are asked for by name, e.g. by the training loop's on-demand generation.
DEFAULT_STRATEGIES: tuple[str, ...] = ("stub", "delete", "module")


def make_strategy(name: str, registry: Mapping[str, str] = STRATEGIES) -> Strategy:
    """The strategy registered as ``name``; ``ConfigError`` naming the available ones otherwise."""
    target = registry.get(name)
    if target is None:
        raise ConfigError(f"unknown strategy {name!r}; available: {', '.join(registry)}")
    module_name, _, attr = target.partition(":")
    strategy: Strategy = getattr(importlib.import_module(module_name), attr)()
    return strategy


def all_strategies(registry: Mapping[str, str] = STRATEGIES) -> dict[str, Strategy]:
    """Every registered strategy by name, in registry order (easiest first)."""
    return {name: make_strategy(name, registry) for name in registry}
