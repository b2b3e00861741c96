"""``taskforge validate DIR``: re-run the contract on every task (gold scores 1, empty patch scores 0)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from taskforge.cli._common import ADVANCED, console, err_console, settings_from, user_errors


def validate(
    dataset: Annotated[Path, typer.Argument(help="Dataset folder written by `taskforge generate`.")],
    sandbox: Annotated[str | None, typer.Option(help="local | docker | auto.")] = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="Gradings in parallel.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary object as the last line.")] = False,
    instance: Annotated[list[str] | None, typer.Option("--id", help="Only these instance ids.",
                                                       rich_help_panel=ADVANCED)] = None,
    work_dir: Annotated[Path | None, typer.Option(help="Work area (environments).", rich_help_panel=ADVANCED)] = None,
) -> None:
    """Grade every task's gold patch (must score 1) and the empty patch (must score 0)."""
    from sandboxes.selection import make_sandbox
    from taskforge.dataset.reader import Dataset
    from taskforge.reward.reward import reward_many
    from taskforge.reward.workspace import DatasetTrees

    with user_errors():
        settings = settings_from(sandbox=sandbox, jobs=jobs, work_dir=work_dir)
        data = Dataset.open(dataset)
        tasks = [t for t in data.tasks() if not instance or t.instance_id in instance]
        box = make_sandbox(settings)
        start = time.monotonic()
        pairs = [(t, p) for t in tasks for p in (t.patch, "")]
        results = reward_many(pairs, sandbox=box, trees=DatasetTrees(Path(dataset)), settings=settings)
    elapsed = time.monotonic() - start
    table = Table(title=f"taskforge validate ({box.name} sandbox, {elapsed:.1f}s)")
    for head in ("instance_id", "gold", "empty", "verdict"):
        table.add_column(head, overflow="fold")
    bad: list[str] = []
    for i, task in enumerate(tasks):
        gold, empty = results[2 * i], results[2 * i + 1]
        ok = gold.score == 1.0 and empty.score == 0.0 and empty.fraction == 0.0
        if not ok:
            bad.append(task.instance_id)
        table.add_row(task.instance_id, f"{gold.score:.0f} {','.join(gold.flags)}",
                      f"{empty.score:.0f} {','.join(f for f in empty.flags if f != 'tests_failed')}",
                      "[green]holds[/]" if ok else "[red]BROKEN[/]")
    console.print(table)
    for iid in bad:
        err_console.print(f"[bold red]task no longer holds:[/] {iid}", highlight=False)
    if as_json:
        print(json.dumps({"tasks": len(tasks), "holding": len(tasks) - len(bad), "broken": bad,
                          "seconds": round(elapsed, 2), "sandbox": box.name}), flush=True)
    if bad:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
