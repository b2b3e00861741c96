"""``taskforge audit DIR``: re-run the leak audit on every task of a dataset.

Each task's agent workspace is rebuilt from the dataset alone (original tree from ``DIR/repos/`` +
``setup_patch``) and scrubbed as the pipeline does (fresh one-commit git); the deleted entities'
original source is read from the original tree; then the workspace, its git store and, when asked,
an environment (``--env-dir`` venv, ``--images``: each task's environment image) are searched.
Exit code 1 when any task has a hit.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from taskforge.cli._common import ADVANCED, console, err_console, user_errors
from taskforge.core.task import AuditResult, LeakHit, Task


def reaudit(data: Any, task: Task, *, env_dir: Path | None = None, image: Any = None,
            docker_client: Any = None, git_mode: str = "fresh", image_cache: Path | None = None) -> AuditResult:
    """Rebuild ``task``'s agent workspace from dataset ``data`` (a ``Dataset``) and audit it.

    ``image``: the task's environment image; the layers of the base image it records in its label
    are not searched (as in ``generate``); ``image_cache``: where image layers are extracted once.
    """
    from sandboxes import isolation
    from taskforge.audit.audit import audit_task_workspace
    from taskforge.audit.fingerprints import entity_sources_in_tree
    from taskforge.audit.scrub import scrub_workspace

    with tempfile.TemporaryDirectory(prefix="taskforge-audit-") as tmp:
        original = data.extract_original(task, Path(tmp) / "original")
        workspace = data.broken_workspace(task, Path(tmp) / "workspace")
        deleted = entity_sources_in_tree(original, task.entities, task.env_spec.src_roots)
        missing = [q for q in task.entities if q not in deleted]
        scrub_workspace(workspace, task.entities, git_mode=git_mode)
        base = _recorded_base(image, docker_client) if image is not None else None
        stdlib = isolation.python_stdlib(env_dir) if env_dir is not None else None  # as generate audits a venv
        result = audit_task_workspace(workspace, deleted, env_dir=env_dir, image=image,
                                      docker_client=docker_client, allowed_text=[task.problem_statement],
                                      image_cache=image_cache, base_image=base,
                                      stdlib=stdlib[0] if stdlib else None, stdlib_skip=stdlib[1] if stdlib else (),
                                      src_roots=task.env_spec.src_roots)
    if missing:  # cannot fingerprint what cannot be found: the audit cannot prove the task clean
        hit = LeakHit("workspace", "", f"source of {', '.join(missing)} not found in the original tree")
        result = AuditResult(result.channels, (*result.hits, hit), result.fingerprints, result.seconds)
    return result


def _recorded_base(image: Any, client: Any) -> str | None:
    from sandboxes.docker_images import recorded_base_image
    from taskforge.audit.image_layers import resolve_image

    return recorded_base_image(resolve_image(image, client))


def audit(
    dataset: Annotated[Path, typer.Argument(help="Dataset folder written by `taskforge generate`.")],
    env_dir: Annotated[Path | None, typer.Option(help="Also search this virtualenv (local sandbox).")] = None,
    images: Annotated[bool, typer.Option(help="Also search each task's environment image (docker SDK).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary object as the last line.")] = False,
    instance: Annotated[list[str] | None, typer.Option("--id", help="Only these instance ids.",
                                                       rich_help_panel=ADVANCED)] = None,
    no_git: Annotated[bool, typer.Option("--no-git", help="Rebuild workspaces without .git (git_mode=none).",
                                         rich_help_panel=ADVANCED)] = False,
) -> None:
    """Search every task's agent workspace (files + git store) and environment for the deleted code."""
    from taskforge.core.settings import Settings
    from taskforge.dataset.reader import Dataset

    with user_errors():
        data = Dataset.open(dataset)
        tasks = [t for t in data.tasks() if not instance or t.instance_id in instance]
        client = None
        if images:
            import docker

            from taskforge.core.errors import SandboxError
            try:
                client = docker.from_env()
                client.ping()
            except Exception as exc:  # docker raises several unrelated types when no engine answers
                raise SandboxError(f"--images needs a Docker engine, none answered ({exc}); start dockerd "
                                   "or drop --images") from exc
        start = time.monotonic()
        image_cache = Settings.load().work_dir / "audit-images" if images else None  # each layer extracted once, by diff id
        results = [reaudit(data, t, env_dir=env_dir, image=(t.image_name or None) if images else None,
                           docker_client=client, git_mode="none" if no_git else "fresh",
                           image_cache=image_cache) for t in tasks]
    elapsed = time.monotonic() - start
    table = Table(title=f"taskforge audit ({len(tasks)} tasks, {elapsed:.1f}s)")
    for head in ("instance_id", "channels", "fingerprints", "hits", "seconds", "stored", "verdict"):
        table.add_column(head, overflow="fold")
    leaky = []
    for task, result in zip(tasks, results, strict=True):
        if not result.passed:
            leaky.append(task.instance_id)
        table.add_row(task.instance_id, ",".join(result.channels), str(result.fingerprints), str(len(result.hits)),
                      f"{result.seconds:.2f}", "pass" if task.audit.passed else "LEAK",
                      "[green]clean[/]" if result.passed else "[red]LEAK[/]")
    console.print(table)
    for task, result in zip(tasks, results, strict=True):
        for hit in result.hits[:5]:
            err_console.print(f"[bold red]leak:[/] {task.instance_id} [{hit.channel}] {hit.path}: {hit.evidence}",
                              highlight=False, soft_wrap=True)
    if as_json:
        print(json.dumps({"tasks": len(tasks), "clean": len(tasks) - len(leaky), "leaky": leaky,
                          "seconds": round(elapsed, 2),
                          "results": {t.instance_id: r.to_dict() for t, r in zip(tasks, results, strict=True)}}),
              flush=True)
    if leaky:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("audit")(audit)
