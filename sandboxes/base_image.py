"""Build a Python base image locally, for hosts that cannot pull from a registry.

``build_base_image(tag)`` runs ``debootstrap --variant=minbase`` (Debian's own packages, from the
apt mirror) with ``python3``, ``python3-venv`` and ``ca-certificates``, trims apt caches and docs,
and imports the root filesystem as an image through the docker SDK (``images`` import API).
Idempotent: an existing tag is returned as is (``force=True`` rebuilds).

Images built here and ``python:3.X-slim`` both work as ``Settings.base_image``: environment images
find the interpreter at ``/usr/local/bin/python3`` or ``/usr/bin/python3``.

    python -m sandboxes.base_image --tag taskforge/base:bookworm
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
import docker.errors

from taskforge.core.errors import SandboxError

DEFAULT_TAG = "taskforge/base:bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
# Trimmed after debootstrap: nothing a test run needs, about a third of the image.
_TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info",
         "usr/share/locale", "var/log")
_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["python3"]',
)


def build_base_image(
    tag: str = DEFAULT_TAG,
    suite: str = "bookworm",
    *,
    mirror: str = DEFAULT_MIRROR,
    timeout_s: float = 1500.0,
    force: bool = False,
    scratch_dir: Path | None = None,
    client: docker.DockerClient | None = None,
) -> str:
    """Build ``tag`` from a debootstrapped ``suite`` unless it exists; return the image id."""
    client = client or _client()
    if not force:
        try:
            return str(client.images.get(tag).id)
        except docker.errors.ImageNotFound:
            pass
    if shutil.which("debootstrap") is None:
        raise SandboxError(f"building base image {tag} needs debootstrap, found none on PATH; "
                           "install it (apt-get install debootstrap) or set base_image to a pullable image")
    if os.geteuid() != 0:
        raise SandboxError(f"building base image {tag} needs root (debootstrap chroots), running as uid "
                           f"{os.geteuid()}; run `sudo taskforge sandbox build-base`")
    deadline = time.monotonic() + timeout_s
    with tempfile.TemporaryDirectory(prefix="taskforge-base-", dir=scratch_dir) as tmp:
        root = Path(tmp) / "rootfs"
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", suite, str(root), mirror],
             deadline, what=f"debootstrap {suite}")
        for rel in _TRIM:
            target = root / rel
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir(parents=True)
        tarball = Path(tmp) / "rootfs.tar"
        _run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(tarball), "."],
             deadline, what="tar rootfs")
        repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
        try:
            client.api.import_image_from_file(str(tarball), repository=repository, tag=version,
                                              changes=list(_CHANGES))
        except docker.errors.APIError as exc:
            raise SandboxError(f"docker import of {tag} failed: {exc.explanation or exc}") from exc
    return str(client.images.get(tag).id)


def base_image_missing(tag: str, client: docker.DockerClient | None = None) -> bool:
    """Whether ``tag`` is absent locally and cannot come from a registry (a ``taskforge/`` image is built
    here, by ``build_base_image``, never pulled)."""
    client = client or _client()
    try:
        client.images.get(tag)
        return False
    except docker.errors.ImageNotFound:
        return tag.startswith("taskforge/")


def _client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(f"no Docker daemon answers ({exc}); start dockerd "
                           "(sandboxes/scripts/setup_host.sh does) or use --sandbox local") from exc
    return client


def _run(argv: list[str], deadline: float, *, what: str) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise SandboxError(f"{what}: no time left of the base-image build timeout; raise timeout_s")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=remaining)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise SandboxError(f"{what} ran past the build timeout and was killed; "
                           f"last output: {out[-500:]!r}") from None
    if proc.returncode != 0:
        tail = " | ".join(out.strip().splitlines()[-5:])
        raise SandboxError(f"{what} exited {proc.returncode} (ran: {' '.join(argv)}): {tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default=DEFAULT_TAG)
    parser.add_argument("--suite", default="bookworm")
    parser.add_argument("--mirror", default=DEFAULT_MIRROR)
    parser.add_argument("--timeout", type=float, default=1500.0)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    try:
        image_id = build_base_image(args.tag, args.suite, mirror=args.mirror, timeout_s=args.timeout,
                                    force=args.force)
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{args.tag} {image_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
