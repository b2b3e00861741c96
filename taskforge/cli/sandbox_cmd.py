"""``taskforge sandbox ...``: the docker backend's images (build the base, build an environment, inspect)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated

import typer

from taskforge.cli._common import ADVANCED, console, settings_from, user_errors


def register(app: typer.Typer) -> None:
    sandbox_app = typer.Typer(name="sandbox", help="Docker sandbox images: base image, environment images.",
                              no_args_is_help=True)

    @sandbox_app.command("build-base")
    def build_base(
        tag: Annotated[str, typer.Option(help="Tag of the image to build.")] = "taskforge/base:bookworm",
        suite: Annotated[str, typer.Option(help="Debian suite to debootstrap.")] = "bookworm",
        mirror: Annotated[str, typer.Option(help="Debian mirror.", rich_help_panel=ADVANCED)]
            = "http://deb.debian.org/debian",
        timeout: Annotated[float, typer.Option(help="Seconds before the build is killed.",
                                               rich_help_panel=ADVANCED)] = 1500.0,
        force: Annotated[bool, typer.Option(help="Rebuild even when the tag exists.")] = False,
    ) -> None:
        """Build a Python base image locally (debootstrap + docker import): no registry needed."""
        from sandboxes.base_image import build_base_image

        with user_errors():
            image_id = build_base_image(tag, suite, mirror=mirror, timeout_s=timeout, force=force)
        console.print(f"{tag} {image_id}  (use it with base_image = \"{tag}\")")

    @sandbox_app.command("build-env")
    def build_env(
        source: Annotated[str, typer.Argument(help="Local path, git URL or pypi:NAME==VERSION.")],
        base_image: Annotated[str | None, typer.Option(help="Base image (default: the setting).")] = None,
        work_dir: Annotated[Path | None, typer.Option(help="Work area.", rich_help_panel=ADVANCED)] = None,
    ) -> None:
        """Detect SOURCE's environment and build (or reuse) its docker environment image."""
        from generators.env_detect import detect_env
        from generators.sources import resolve_source
        from sandboxes.docker import DockerSandbox

        with user_errors():
            settings = settings_from(sandbox="docker", base_image=base_image, work_dir=work_dir)
            snapshot = resolve_source(source, Path(settings.work_dir))
            repo = Path(snapshot.path)
            spec = detect_env(repo, python=settings.python.removeprefix("python") or "3.11",
                              name_hint=snapshot.name)
            env = DockerSandbox(settings).prepare(spec, repo)
        console.print(f"{env.location}  python {env.python_version}, {len(env.frozen)} pinned packages, "
                      f"built in {env.build_seconds:.1f}s")

    @sandbox_app.command("reap")
    def reap_sessions(
        docker: Annotated[bool, typer.Option(help="Also remove session and run containers whose owner process "
                                                  "is gone.")] = True,
    ) -> None:
        """Remove what crashed runs left behind (agent session directories, session and run containers)."""
        from taskforge.agent.reaper import reap

        with user_errors():
            client = None
            if docker:
                from sandboxes.docker import docker_available, docker_client

                client = docker_client(timeout_s=30) if docker_available() else None
            reaped = reap(client)
            runs: list[str] = []
            if client is not None:
                from sandboxes.docker import reap_runs

                runs = reap_runs(client)
        console.print(f"reaped {len(reaped)} session(s){': ' + ', '.join(reaped) if reaped else ''}"
                      f" and {len(runs)} run container(s)")

    @sandbox_app.command("info")
    def info(
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ) -> None:
        """Docker daemon, base image and cached environment images."""
        import docker.errors

        from sandboxes.docker import docker_client
        from sandboxes.docker_images import IMAGE_REPOSITORY, LABEL

        with user_errors():
            settings = settings_from()
            client = docker_client(timeout_s=30)
            version = client.version()
            try:
                base = client.images.get(settings.base_image)
                base_info = {"tag": settings.base_image, "id": base.id, "size_mb": round(base.attrs["Size"] / 1e6)}
            except docker.errors.ImageNotFound:
                base_info = {"tag": settings.base_image, "id": None}
            envs = []
            for image in client.images.list(name=IMAGE_REPOSITORY):
                label = json.loads((image.labels or {}).get(LABEL, "{}") or "{}")
                envs.append({"tags": image.tags, "size_mb": round(image.attrs["Size"] / 1e6),
                             "project": label.get("spec", {}).get("project_name", "?"),
                             "packages": len(label.get("frozen", []))})
        summary = {"server_version": version.get("Version"), "api_version": version.get("ApiVersion"),
                   "base_image": base_info, "env_images": envs}
        if as_json:
            print(json.dumps(summary))
            return
        console.print(f"docker {summary['server_version']} (API {summary['api_version']})")
        console.print(f"base image {settings.base_image}: "
                      + (f"{base_info['id'][:19]} {base_info['size_mb']} MB" if base_info["id"]
                         else "missing (taskforge sandbox build-base)"))
        for e in envs:
            console.print(f"  {', '.join(e['tags'])}  {e['project']}  {e['packages']} packages  {e['size_mb']} MB")

    @sandbox_app.command("prune")
    def prune(
        older_than: Annotated[float | None, typer.Option(
            help="Also remove env images created more than this many days ago.")] = None,
        everything: Annotated[bool, typer.Option("--all", help="Remove every env image.")] = False,
        dry_run: Annotated[bool, typer.Option(help="List what would go; remove nothing.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ) -> None:
        """Remove env images no run can use again (base image gone), build leftovers, and old images."""
        from sandboxes.docker import docker_client
        from sandboxes.docker_images import prune_env_images
        from taskforge.audit.image_layers import forget_cached_image

        with user_errors():
            settings = settings_from()
            pruned = prune_env_images(docker_client(timeout_s=120), older_than_days=older_than,
                                      everything=everything, dry_run=dry_run,
                                      on_removed=functools.partial(forget_cached_image,
                                                                   Path(settings.work_dir) / "audit-images"))
        freed = sum(p.size_mb for p in pruned if p.removed)
        if as_json:
            print(json.dumps({"dry_run": dry_run, "freed_mb": freed,
                              "images": [{"id": p.image_id, "tags": list(p.tags), "size_mb": p.size_mb,
                                          "reason": p.reason, "removed": p.removed, "error": p.error}
                                         for p in pruned]}))
            return
        for p in pruned:
            state = "would remove" if dry_run else ("removed" if p.removed else f"kept ({p.error})")
            console.print(f"{state}: {', '.join(p.tags) or p.image_id[:19]}  {p.size_mb} MB  ({p.reason})")
        console.print(f"{len(pruned)} images {'to remove' if dry_run else 'pruned'}, "
                      f"{sum(p.size_mb for p in pruned) if dry_run else freed} MB")

    app.add_typer(sandbox_app, name="sandbox")
