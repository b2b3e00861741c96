"""What every interpreter of a task environment runs at start-up, besides the runner's own code.

``runner/isolated_roots.py`` goes into the environment's site-packages as ``_taskforge_roots`` with a
one-line ``.pth``; in an interpreter started with ``-I`` or ``-E`` it puts the roots that
``TASKFORGE_SRC_ROOTS`` names on ``sys.path``, as ``PYTHONPATH`` does for every other one, so a test's
``python -I -c "import multidict"`` child imports the workspace's project as it would an installed one.
Every backend installs it: the local sandbox into each venv it prepares (cached ones included), the
docker sandbox into its environment image, and a Harbor export into both of its images.

The variable is set only where the code under test runs (``sandboxes.local.run_env``, the Harbor
verifier's child, the agent's image): never for a grader's own ``python -I``, which must not import the
workspace.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from taskforge.core.files import write_atomic

ROOTS_ENV = "TASKFORGE_SRC_ROOTS"  # runner/isolated_roots.py reads the same name
ROOTS_MODULE = "_taskforge_roots"
ROOTS_SOURCE = Path(__file__).parent / "runner" / "isolated_roots.py"


def files() -> dict[str, bytes]:
    """The hook's two files, named as they go into site-packages."""
    return {f"{ROOTS_MODULE}.py": ROOTS_SOURCE.read_bytes(), f"{ROOTS_MODULE}.pth": f"import {ROOTS_MODULE}\n".encode()}


def install(site_dir: Path) -> None:
    """Put the hook into ``site_dir``; a file already there with the same bytes is left alone (idempotent,
    and atomic for the runs that use the environment meanwhile)."""
    for name, data in files().items():
        target = Path(site_dir) / name
        try:
            if target.read_bytes() == data:
                continue
        except OSError:
            pass
        write_atomic(target, data)


def roots_env(roots: Iterable[str]) -> dict[str, str]:
    """The variable that names the source roots (absolute paths) for isolated interpreters."""
    return {ROOTS_ENV: os.pathsep.join(roots)}
