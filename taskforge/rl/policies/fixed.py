"""``oracle`` (the gold patch) and ``null`` (the empty patch): they check the whole chain end to end."""

from __future__ import annotations

from taskforge.core.task import Task
from taskforge.rl.policies.base import PolicyOptions, _Stateless


class OraclePolicy(_Stateless):
    """Always the gold patch: must score 1.0 through the real reward path."""

    name = "oracle"

    def propose(self, task: Task, n: int) -> list[str]:
        return [task.patch] * n


class NullPolicy(_Stateless):
    """Always the empty patch: must score 0.0 (the hidden tests fail on the broken workspace)."""

    name = "null"

    def propose(self, task: Task, n: int) -> list[str]:
        return [""] * n


def make_oracle(options: PolicyOptions) -> OraclePolicy:
    return OraclePolicy()


def make_null(options: PolicyOptions) -> NullPolicy:
    return NullPolicy()
