"""``taskforge generate SOURCE... --out DIR``: mine, profile, propose, delete, validate, write tasks."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from generators.registry import DEFAULT_STRATEGIES
from sandboxes import reaper
from taskforge.cli._common import ADVANCED, console, err_console, settings_from, user_errors
from taskforge.pipeline.stopping import stop_on_sigterm


def generate(
    sources: Annotated[list[str], typer.Argument(help="Local path, git URL, or pypi:NAME==VERSION (several allowed).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Dataset folder (created, or continued if it exists).")],
    strategies: Annotated[str, typer.Option(help="Comma-separated, from: stub,delete,module,feature (the harder tier: whole features a test group reaches).")] = ",".join(DEFAULT_STRATEGIES),
    max_tasks: Annotated[int | None, typer.Option(min=1, help="At most this many tasks per source.")] = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="Parallel workers (1 = synchronous).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of every ranking tie-break and shuffle.")] = 0,
    sandbox: Annotated[str | None, typer.Option(help="local | docker | auto.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary object as the last line.")] = False,
    rev: Annotated[str | None, typer.Option(help="Branch, tag or sha of git sources.", rich_help_panel=ADVANCED)] = None,
    max_candidates: Annotated[int | None, typer.Option(min=1, help="Validate at most this many ranked candidates per source.",
                                                       rich_help_panel=ADVANCED)] = None,
    executor: Annotated[str | None, typer.Option(help="process | ray.", rich_help_panel=ADVANCED)] = None,
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address ('' = local instance).",
                                                    rich_help_panel=ADVANCED)] = None,
    repeats: Annotated[int | None, typer.Option(min=1, help="Repeats of every validation check.",
                                                rich_help_panel=ADVANCED)] = None,
    runs: Annotated[int | None, typer.Option(min=1, help="Baseline full-suite runs (flaky detection).",
                                             rich_help_panel=ADVANCED)] = None,
    work_dir: Annotated[Path | None, typer.Option(help="Work area reused across runs.", rich_help_panel=ADVANCED)] = None,
    test_timeout: Annotated[float | None, typer.Option(help="Seconds one suite run may take.",
                                                       rich_help_panel=ADVANCED)] = None,
    max_minutes: Annotated[float | None, typer.Option(min=0.1, help="Stop after this many minutes, keeping every "
                                                      "task accepted so far (rerun to resume).")] = None,
    build_base: Annotated[bool, typer.Option("--build-base", help="With --sandbox docker: build the base image "
                                             "first when it is missing.", rich_help_panel=ADVANCED)] = False,
) -> None:
    """Generate validated feature-deletion tasks from SOURCE(s) into the dataset at OUT."""
    from taskforge.pipeline.executors import make_executor
    from taskforge.pipeline.generate import GenerateOptions
    from taskforge.pipeline.generate import generate as run_generate

    with user_errors():
        settings = settings_from(sandbox=sandbox, jobs=jobs, executor=executor, ray_address=ray_address,
                                 validation_repeats=repeats, baseline_runs=runs, work_dir=work_dir,
                                 test_timeout_s=test_timeout, seed=seed)
        options = GenerateOptions(strategies=tuple(s.strip() for s in strategies.split(",") if s.strip()),
                                  max_tasks=max_tasks, max_candidates=max_candidates, seed=seed, rev=rev,
                                  max_minutes=max_minutes)
        if settings.sandbox == "docker":
            ensure_base_image(settings.base_image, build_base)
        start = time.monotonic()
        with reaper.guard(), stop_on_sigterm():  # nothing this run starts outlives it, even on SIGKILL
            ex = make_executor(settings.executor, settings.jobs, settings.ray_address)
            stopped = False
            try:
                with _progress() as progress:
                    summaries = run_generate(sources, out, settings, options, ex, _emitter(progress))
                stopped = any(s.error.startswith("stopped by") for s in summaries)
            finally:
                ex.close(wait=not stopped)
    elapsed = time.monotonic() - start
    failed = [s for s in summaries if s.error]
    console.print(_table(summaries, elapsed))
    for s in failed:  # one line each, outside the table (the table's funnel column never wraps an error)
        err_console.print(f"[bold red]error:[/] {escape(s.source)}: {escape(s.error)}", highlight=False,
                          soft_wrap=True)
    console.print(f"dataset: {out} ({sum(s.tasks for s in summaries)} tasks written this run)", highlight=False)
    _statement_line(out)
    if as_json:
        print(json.dumps({"tasks": sum(s.tasks for s in summaries), "seconds": round(elapsed, 2), "out": str(out),
                          "sources": [s.to_dict() for s in summaries]}), flush=True)
    if failed:
        raise typer.Exit(1)


def ensure_base_image(tag: str, build: bool) -> None:
    """A missing locally-built base image: build it (``--build-base``, or yes at the prompt) or say how."""
    from sandboxes.base_image import base_image_missing, build_base_image
    from taskforge.core.errors import SandboxError

    if not base_image_missing(tag):
        return
    if not build and sys.stdin.isatty():
        build = typer.confirm(f"base image {tag} is not built yet; build it now (debootstrap, a few minutes)?")
    if not build:
        raise SandboxError(f"base image {tag} is not built yet; run `taskforge sandbox build-base --tag {tag}` "
                           "or pass --build-base")
    with err_console.status(f"building base image {tag} (debootstrap + docker import)...", spinner="dots"):
        build_base_image(tag)
    err_console.print(f"built base image {tag}", highlight=False)


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err_console, transient=False)


def _emitter(progress: Progress) -> Any:
    bars: dict[str, Any] = {}

    def emit(event: str, data: dict[str, Any]) -> None:
        if event == "profiles":
            bars["repos"] = progress.add_task("repositories profiled", total=data["total"])
        elif event == "profiled":
            progress.advance(bars["repos"])
        elif event == "candidates":
            bars["cand"] = progress.add_task(f"candidates of {data['source']}", total=data["total"],
                                             completed=data["done"])
            bars["acc"] = progress.add_task("  accepted", total=None)
        elif event == "candidate":
            progress.advance(bars["cand"])
            if data["accepted"]:
                progress.advance(bars["acc"])
        elif event == "variant":
            progress.console.print(f"{escape(data['source'])}: {escape(data['message'])}", highlight=False,
                                   soft_wrap=True)
        elif event == "warning":
            progress.console.print(f"[yellow]warning:[/] {escape(data['source'])}: {escape(data['message'])}",
                                   highlight=False, soft_wrap=True)

    return emit


def _table(summaries: list[Any], elapsed: float) -> Table:
    table = Table(title=f"taskforge generate ({elapsed / 60:.1f} min)")
    for head in ("source", "candidates", "stub", "delete", "module", "feature", "rejection funnel", "min"):
        table.add_column(head, overflow="fold", justify="left" if head in ("source", "rejection funnel") else "right")
    for s in summaries:
        funnel = ", ".join(f"{k}={v}" for k, v in sorted(s.funnel.items(), key=lambda kv: -kv[1])) or "-"
        if s.error and not s.funnel:
            funnel = "[red]failed (see the error below)[/]"
        table.add_row(s.source, str(s.candidates),
                      *(str(s.accepted.get(k, 0)) for k in ("stub", "delete", "module", "feature")),
                      funnel, f"{s.seconds / 60:.1f}")
    return table


def _statement_line(out: Path) -> None:
    """The share of statements the statement check had to complete, per repository and strategy."""
    from generators.statement_check import flagged_line
    from taskforge.core.errors import TaskforgeError
    from taskforge.dataset.reader import Dataset

    try:
        line = flagged_line(Dataset.open(out).tasks())
    except (TaskforgeError, OSError):
        return
    if line:
        console.print(line, highlight=False, soft_wrap=True)


def compose(
    dataset: Annotated[Path, typer.Argument(help="Dataset folder written by `taskforge generate`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Dataset folder for the composed tasks (may be DATASET).")],
    k: Annotated[int, typer.Option(min=2, help="Validated tasks combined into one.")] = 2,
    max_tasks: Annotated[int | None, typer.Option(min=1, help="At most this many composed tasks per repository.")] = None,
    max_candidates: Annotated[int | None, typer.Option(min=1, help="Validate at most this many compositions per "
                                                       "repository.", rich_help_panel=ADVANCED)] = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="Parallel workers (1 = synchronous).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the choice of parts.")] = 0,
    sandbox: Annotated[str | None, typer.Option(help="local | docker | auto.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary object as the last line.")] = False,
    work_dir: Annotated[Path | None, typer.Option(help="Work area that generated DATASET.", rich_help_panel=ADVANCED)] = None,
) -> None:
    """Combine k validated tasks of one repository into one task (tier 2 + k), validated as a task of its own."""
    from taskforge.pipeline.compose import ComposeOptions
    from taskforge.pipeline.compose import compose as run_compose
    from taskforge.pipeline.executors import make_executor

    with user_errors():
        settings = settings_from(sandbox=sandbox, jobs=jobs, work_dir=work_dir, seed=seed)
        options = ComposeOptions(k=k, max_tasks=max_tasks, max_candidates=max_candidates, seed=seed)
        start = time.monotonic()
        ex = make_executor(settings.executor, settings.jobs, settings.ray_address)
        try:
            with _progress() as progress:
                summaries = run_compose(dataset, out, settings, options, ex, _emitter(progress))
        finally:
            ex.close()
    elapsed = time.monotonic() - start
    for s in summaries:
        status = f"[red]{s.error}[/]" if s.error else ", ".join(f"{r}={n}" for r, n in sorted(s.funnel.items()))
        console.print(f"{s.repo}: {s.tasks} composed tasks of {s.candidates} compositions ({status})",
                      highlight=False, soft_wrap=True)
    _statement_line(out)
    if as_json:
        print(json.dumps({"tasks": sum(s.tasks for s in summaries), "seconds": round(elapsed, 2), "out": str(out),
                          "repos": [s.to_dict() for s in summaries]}), flush=True)
    if any(s.error for s in summaries):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("generate")(generate)
    app.command("compose")(compose)
