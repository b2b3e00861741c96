"""Pick the sandbox backend named by ``Settings.sandbox``: ``local`` | ``docker`` | ``auto`` | ``local-unsafe``.

``auto`` uses Docker when a daemon answers a ping, else the local backend. The Docker backend is
imported lazily, so the local one works on machines without the docker SDK or a daemon.
"""

from __future__ import annotations

from sandboxes.protocol import Sandbox
from taskforge.core.errors import ConfigError, SandboxError
from taskforge.core.settings import Settings

BACKENDS = ("local", "docker", "auto", "local-unsafe")


def docker_available() -> bool:
    """True when a Docker daemon answers ``ping`` (within a few seconds)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - any failure means "no usable daemon"
        return False


def make_sandbox(settings: Settings) -> Sandbox:
    name = settings.sandbox
    if name not in BACKENDS:
        raise ConfigError(f"unknown sandbox {name!r}; expected one of {', '.join(BACKENDS)}")
    if name == "auto":
        name = "docker" if docker_available() else "local"
    if name in ("local", "local-unsafe"):
        from sandboxes.local import LocalSandbox

        return LocalSandbox(settings, confined=name == "local")
    try:
        from sandboxes.docker import DockerSandbox
    except ImportError as exc:
        raise SandboxError(f"the docker sandbox cannot be loaded ({exc}); use --sandbox local") from exc
    return DockerSandbox(settings)
