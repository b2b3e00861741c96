"""Session-wide test setup.

Real-package tests share one content-addressed work area (repos, sdists, environments), so a
virtualenv built for ``inflection`` by one test is reused by the next instead of rebuilt. It lives in
``$TMPDIR/taskforge-test-work`` (outside the repository, so pytest runs inside workspaces never see this
repository's configuration) unless ``TASKFORGE_WORK_DIR`` is set. Tests that need isolation pass their
own ``work_dir``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest


def pytest_configure(config) -> None:  # noqa: ANN001 - pytest hook signature
    if "TASKFORGE_WORK_DIR" not in os.environ:
        work = Path(tempfile.gettempdir()) / "taskforge-test-work"
        work.mkdir(parents=True, exist_ok=True)
        os.environ["TASKFORGE_WORK_DIR"] = str(work)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001 - pytest hook signature
    """Under ``--dist loadgroup``: a test file stays on one worker, and every docker test shares one worker.

    Docker tests check that nothing is left on the engine after a run; a second worker's containers
    would be counted as leftovers.
    """
    for item in items:
        group = "docker" if item.get_closest_marker("docker") else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
