"""Static difficulty features of a task and one scalar score in [0, 1] (higher is harder).

The score is a weighted sum of saturating, log-scaled features (each in [0, 1])::

    n(x, cap) = min(1, log(1 + max(x, 0)) / log(1 + cap))

    score = 0.25 * min(tier, 2) / 2                  # stub 0, delete 0.5, module and above 1
          + 0.25 * n(statements_deleted, 60)         # how much code to write
          + 0.15 * n(complexity, 30)                 # how many branches it has
          + 0.10 * n(entities_deleted - 1, 10)       # helpers/dependents to rebuild as well
          + 0.10 * n(fan_out, 25)                    # distinct names the code calls (API to know)
          + 0.05 * n(files_touched - 1, 5)           # edits spread over several files
          + 0.05 * n(fan_in, 20)                     # uses elsewhere constrain the interface
          + 0.05 * n(fail_to_pass, 50)               # hidden tests that must all pass

Tiers: stub 0, delete 1, module 2, feature 3, a composition of k deletions 2 + k (``tier_of``). Above
tier 2 the tier term is saturated: a feature or a composition is harder through what it deletes (summed
statements, complexity, entities, files), which the other terms measure.

The weights sum to 1, so the score is in [0, 1]; it is rounded to 4 decimals. Strategy tier and code
size dominate on purpose: they are the features most predictive of solve rates in feature-deletion
benchmarks, and both are known before any rollout. The curriculum uses the score only as a prior
and updates it from observed pass rates.
"""

from __future__ import annotations

import dataclasses
import math

from generators.deletion import Deletion
from taskforge.core.task import Difficulty

STRATEGY_TIERS = {"stub": 0, "delete": 1, "module": 2, "feature": 3}
COMPOSE_BASE_TIER = 2  # a composition of k deletions is tier 2 + k (k=2: 4), above every single deletion


def tier_of(deletion: Deletion) -> int:
    """The strategy's tier; a composition's grows with the number ``k`` of deletions it combines."""
    if deletion.strategy == "compose":
        return COMPOSE_BASE_TIER + int(deletion.extra.get("k", 2))
    return STRATEGY_TIERS.get(deletion.strategy, 1)

WEIGHTS: dict[str, tuple[float, float]] = {  # feature -> (weight, saturation cap)
    "statements_deleted": (0.25, 60),
    "complexity": (0.15, 30),
    "extra_entities": (0.10, 10),
    "fan_out": (0.10, 25),
    "extra_files": (0.05, 5),
    "fan_in": (0.05, 20),
    "fail_to_pass": (0.05, 50),
}
TIER_WEIGHT = 0.25


def _n(x: float, cap: float) -> float:
    return min(1.0, math.log1p(max(x, 0.0)) / math.log1p(cap))


def score(tier: int, statements_deleted: int, complexity: int, entities_deleted: int, fan_out: int,
          files_touched: int, fan_in: int, fail_to_pass: int) -> float:
    """The documented scalar difficulty (see the module docstring)."""
    values = {
        "statements_deleted": statements_deleted, "complexity": complexity,
        "extra_entities": entities_deleted - 1, "fan_out": fan_out, "extra_files": files_touched - 1,
        "fan_in": fan_in, "fail_to_pass": fail_to_pass,
    }
    total = TIER_WEIGHT * min(max(tier, 0), 2) / 2
    total += sum(w * _n(values[k], cap) for k, (w, cap) in WEIGHTS.items())
    return round(min(1.0, max(0.0, total)), 4)


def difficulty_of(deletion: Deletion, fail_to_pass: int, files_touched: int | None = None) -> Difficulty:
    """Difficulty features of a deletion with ``fail_to_pass`` hidden tests.

    ``files_touched`` defaults to the non-test files the deletion changed (hidden tests excluded).
    """
    tier = tier_of(deletion)
    files = deletion.files_touched if files_touched is None else files_touched
    entities = len(deletion.deleted)
    return Difficulty(
        tier=tier, lines_deleted=deletion.lines_deleted, statements_deleted=deletion.statements_deleted,
        entities_deleted=entities, complexity=deletion.complexity, fan_in=deletion.fan_in,
        fan_out=deletion.fan_out, files_touched=files, fail_to_pass=fail_to_pass,
        score=score(tier, deletion.statements_deleted, deletion.complexity, entities, deletion.fan_out, files,
                    deletion.fan_in, fail_to_pass),
    )


def with_fail_to_pass(d: Difficulty, fail_to_pass: int) -> Difficulty:
    """``d`` for a task whose FAIL_TO_PASS set shrank to ``fail_to_pass`` tests after it was built (validation
    left out tests that pass without the feature in some runs: ``taskforge.validate.steps``)."""
    return dataclasses.replace(d, fail_to_pass=fail_to_pass, score=score(
        d.tier, d.statements_deleted, d.complexity, d.entities_deleted, d.fan_out, d.files_touched, d.fan_in,
        fail_to_pass))


def band(score_value: float) -> str:
    """A coarse label for tables and histograms: easy < 1/3 <= medium < 2/3 <= hard."""
    return "easy" if score_value < 1 / 3 else ("medium" if score_value < 2 / 3 else "hard")
