"""What the grader owns in a workspace: test and test-support files, and names no new module may take.

Stdlib only: the reward path's ``patch_guard`` and ``workspace`` use it, and the exported Harbor verifier
ships it as is (``tests/harbor_protected.py``), so both classify an agent's files with the same code.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import PurePosixPath

TEST_DIR_NAMES = frozenset({"tests", "test"})
SUPPORT_NAMES = frozenset({
    "conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml",
    "sitecustomize.py", "usercustomize.py",
})
# never legitimate in a source patch: executed at interpreter start-up, before any check
STARTUP_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
SHADOW_GUARDED = frozenset({
    "pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "coverage", "xdist", "pytest_timeout",
    "_tfg", "site", "sitecustomize", "usercustomize",
    "_taskforge_ext",  # the environment's .pth imports it at start-up (sandboxes/extensions.py)
    "_taskforge_roots",  # likewise (sandboxes/startup_hooks.py)
}) | frozenset(sys.stdlib_module_names)


@dataclass(frozen=True, slots=True)
class ProtectedPaths:
    """What the grader owns in a workspace: test files and test-support files (workspace-relative)."""

    test_dirs: tuple[str, ...] = ("tests",)  # EnvSpec.test_paths
    src_roots: tuple[str, ...] = (".",)  # EnvSpec.src_roots: where a shadowing module would be imported
    extra: frozenset[str] = frozenset()  # hidden test files, plugin modules named by the original config
    exempt: frozenset[str] = frozenset()  # source files the gold patch edits: never treated as tests
    guarded: frozenset[str] = SHADOW_GUARDED  # names a new top-level module may not take

    @classmethod
    def from_config(cls, cfg: dict) -> ProtectedPaths:
        """From an exported Harbor verifier's ``config.json`` (``grading_rules``); the guarded names also
        get the stdlib of the interpreter that grades."""
        return cls(tuple(cfg.get("test_paths", ("tests",))), tuple(cfg.get("src_roots", (".",))),
                   frozenset(cfg.get("protected_extra", ())), frozenset(cfg.get("protected_exempt", ())),
                   frozenset(cfg.get("shadow_guarded", ())) | SHADOW_GUARDED)

    def kind(self, rel: str) -> str | None:
        """``"support"``, ``"test"`` or None (a source file the agent may edit)."""
        p = PurePosixPath(rel)
        if p.name in SUPPORT_NAMES or p.suffix == ".pth":
            return "support"
        if rel in self.exempt:  # before ``extra``: a source module that also holds doctests stays source
            return None
        if rel in self.extra:
            return "test"
        if any(part in TEST_DIR_NAMES for part in p.parts[:-1]):
            return "test"
        if p.suffix == ".py" and (p.name.startswith("test_") or p.stem.endswith("_test")):
            return "test"
        for d in self.test_dirs:
            d = d.strip("/")
            if d not in ("", ".") and (rel == d or rel.startswith(d + "/")):
                return "test"
        return None

    def shadows(self, rel: str) -> bool:
        """True when ``rel`` is a top-level module/package under a src root named like a guarded module."""
        p = PurePosixPath(rel)
        for root in self.src_roots:
            root = root.strip("/")
            inner = p if root in ("", ".") else (p.relative_to(root) if p.is_relative_to(root) else None)
            if inner is None or not inner.parts:
                continue
            top = inner.parts[0]
            name = top[:-3] if len(inner.parts) == 1 and top.endswith(".py") else top
            if len(inner.parts) == 1 and not top.endswith((".py", ".pyc", ".so")):
                continue
            if name in self.guarded or name.startswith("_tfg"):
                return True
        return False
