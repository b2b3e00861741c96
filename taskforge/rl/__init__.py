"""The RL side of taskforge: curriculum sampler, policies, grading seam and the training loop.

Kept light on purpose: importing ``taskforge.rl`` imports no torch and no policy backend. Import the
concrete modules (``taskforge.rl.curriculum``, ``taskforge.rl.loop``, ...) where you need them.

- ``curriculum``: ``CurriculumSampler`` (a ``torch.utils.data.Sampler``) and ``UniformSampler``.
- ``policies``: the ``Policy`` protocol and the built-in policies (oracle, null, simulated, command, openai).
- ``grading``: the ``Grader`` seam (``FakeGrader`` for tests, ``SandboxGrader`` over ``taskforge.reward.reward``).
- ``loop``: ``train(...)``, the readable RL loop.
- ``verl_adapter``: the same curriculum behind verl's ``AbstractCurriculumSampler`` hook.
"""

from __future__ import annotations

from typing import Any

__all__: list[str] = []


# --- lazy exports --------------------------------------------------------------------------------
# name -> module that defines it; resolved on first attribute access so that `import taskforge.rl`
# stays free of torch. Other modules add their exports here (one line each).
_LAZY_EXPORTS: dict[str, str] = {
    "CurriculumSampler": "taskforge.rl.curriculum",
    "UniformSampler": "taskforge.rl.curriculum",
}
# --- end lazy exports ----------------------------------------------------------------------------

# --- Muon export (owned by the optimizer helper) ---------------------------------------------------
# lazy: keeps torch out of `import taskforge.rl`
_LAZY_EXPORTS["Muon"] = "taskforge.rl.muon"
# --- end Muon export -----------------------------------------------------------------------------


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'taskforge.rl' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
