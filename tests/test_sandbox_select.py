"""Choosing the sandbox backend from settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxes.local import LocalSandbox
from sandboxes.protocol import Sandbox
from sandboxes.selection import docker_available, make_sandbox
from taskforge.core.errors import ConfigError
from taskforge.core.settings import Settings


def test_local_is_the_default_and_satisfies_the_protocol(tmp_path: Path) -> None:
    box = make_sandbox(Settings(work_dir=tmp_path))
    assert isinstance(box, LocalSandbox) and isinstance(box, Sandbox)
    assert box.name == "local"


def test_unknown_backend_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown sandbox 'podman'"):
        make_sandbox(Settings(work_dir=tmp_path, sandbox="podman"))


def test_auto_follows_the_daemon(tmp_path: Path) -> None:
    box = make_sandbox(Settings(work_dir=tmp_path, sandbox="auto"))
    assert box.name == ("docker" if docker_available() else "local")
