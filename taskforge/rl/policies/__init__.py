"""Policies: what proposes patches for a task. One protocol, several implementations.

``Policy.propose(task, n)`` returns ``n`` patches (unified diffs against the broken workspace; ``""`` is
the empty patch). ``update(groups)`` is the learning hook the loop calls after grading, with the graded
groups the step trains on; it returns metrics (``loss`` when the policy has one). ``state_dict`` /
``load_state_dict`` make a run resumable.

Built-ins (``POLICY_FACTORIES``; ``make_policy(name, options)`` builds one):

* ``oracle``: the gold patch; ``null``: the empty patch. They check the whole chain end to end.
* ``simulated``: **a simulation, not a model.** See ``SimulatedPolicy``.
* ``command``: an external agent run as a subprocess (``CommandPolicy``).
* ``openai``: an OpenAI-compatible chat-completions endpoint (``OpenAIPolicy``).
* ``hf``: a transformers causal LM trained with GRPO (``hf.py``).

One module per policy; ``base.py`` holds the protocol and its options.

To add a policy, add one ``name -> "module:factory"`` line to ``POLICY_FACTORIES``; the factory takes a
``PolicyOptions`` and is imported only when that policy is chosen.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from taskforge.core.errors import ConfigError
from taskforge.rl.policies.base import Policy, PolicyOptions, WorkspaceProvider, dataset_workspaces
from taskforge.rl.policies.command import CommandPolicy
from taskforge.rl.policies.fixed import NullPolicy, OraclePolicy
from taskforge.rl.policies.openai_chat import SYSTEM_PROMPT, OpenAIPolicy
from taskforge.rl.policies.simulated import SimulatedPolicy

# name -> "module:factory"; factories take PolicyOptions. Imported only when chosen (hf needs torch).
POLICY_FACTORIES: Mapping[str, str] = {
    "oracle": "taskforge.rl.policies.fixed:make_oracle",
    "null": "taskforge.rl.policies.fixed:make_null",
    "simulated": "taskforge.rl.policies.simulated:make_simulated",
    "command": "taskforge.rl.policies.command:make_command",
    "openai": "taskforge.rl.policies.openai_chat:make_openai",
    "hf": "taskforge.rl.policies.hf:make_policy",
}


def make_policy(name: str, options: PolicyOptions | None = None,
                factories: Mapping[str, str] = POLICY_FACTORIES) -> Policy:
    """Build the policy registered under ``name``."""
    target = factories.get(name)
    if target is None:
        raise ConfigError(f"unknown policy {name!r}; available: {', '.join(sorted(factories))}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"policy {name!r} needs module {module_name} ({exc}); install taskforge[rl]") from exc
    factory: Callable[[PolicyOptions], Policy] = getattr(module, attr)
    return factory(options or PolicyOptions())


__all__ = ["POLICY_FACTORIES", "SYSTEM_PROMPT", "CommandPolicy", "NullPolicy", "OpenAIPolicy", "OraclePolicy",
           "Policy", "PolicyOptions", "SimulatedPolicy", "WorkspaceProvider", "dataset_workspaces", "make_policy"]
