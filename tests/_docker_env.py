"""Shared setup of the docker-marked tests: a daemon (or a visible skip), a tiny repository, its image.

``TASKFORGE_REQUIRE_DOCKER=1`` turns "no daemon" into a failure instead of a skip (CI sets it when
``make host`` succeeded).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from taskforge.core.environment import EnvSpec

MINI_SPEC = EnvSpec(project_name="mini", python="3.11", install_target=".", package_dirs=("mini",),
                    test_paths=("tests",))

MINI_FILES = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "mini"
        version = "1.2.3"
        dependencies = ["six>=1.16"]
        [tool.setuptools]
        packages = ["mini"]
    """,
    "mini/__init__.py": """
        import importlib.metadata
        VERSION = importlib.metadata.version("mini")

        def add(a, b):
            return a + b

        def halve(x):
            if x % 2:
                raise ValueError("odd")
            return x // 2
    """,
    "tests/conftest.py": """
        import pytest

        @pytest.fixture
        def two():
            return 2
    """,
    "tests/test_mini.py": """
        import pytest
        import six
        from mini import VERSION, add, halve

        def test_add(two):
            assert add(1, 1) == two

        def test_version():
            assert VERSION == "1.2.3" and six.PY3

        def test_wrong():
            assert add(1, 1) == 3

        @pytest.mark.skip(reason="not today")
        def test_skipped():
            pass

        @pytest.mark.xfail(strict=True)
        def test_xfail():
            halve(3)

        @pytest.mark.parametrize("x", [2, 4])
        def test_halve(x):
            assert halve(x) * 2 == x
    """,
}


def write_files(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def require_docker():
    """A pinged docker client, or a skip with the reason (a failure when TASKFORGE_REQUIRE_DOCKER=1)."""
    from sandboxes.docker import docker_client
    from taskforge.core.errors import SandboxError

    try:
        return docker_client(timeout_s=600)
    except SandboxError as exc:
        if os.environ.get("TASKFORGE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"docker required but unavailable: {exc}")
        pytest.skip(f"no Docker daemon: {exc} (run `make host`)")


def require_base_image(client, tag: str) -> None:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        if os.environ.get("TASKFORGE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"base image {tag} missing")
        pytest.skip(f"base image {tag} missing (run `taskforge sandbox build-base`)")
