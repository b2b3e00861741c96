"""``taskforge validate DIR``: re-run the contract on every task (gold scores 1, empty patch scores 0).

The empty patch is graded on the FAIL_TO_PASS tests alone (``_decisive``): they decide its verdict."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from taskforge.cli._common import ADVANCED, console, err_console, settings_from, user_errors


def validate(
    dataset: Annotated[Path, typer.Argument(help="Dataset folder written by `taskforge generate`.")],
    sandbox: Annotated[str | None, typer.Option(help="local | docker | auto.")] = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="Gradings in parallel.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print each task's verdict as a JSON line once known, and one JSON summary object as the last line.")] = False,
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
        pairs = [pair for t in tasks for pair in ((t, t.patch), (_decisive(t), ""))]
        done: dict[int, Any] = {}

        def verdict(i: int, res: Any) -> None:
            """Each task's verdict as soon as both its gradings ended (a killed run keeps what it printed)."""
            done[i] = res
            k = i - i % 2
            if k in done and k + 1 in done:
                gold, empty = done[k], done[k + 1]
                ok = _holds(gold, empty)
                iid = tasks[k // 2].instance_id
                if as_json:
                    print(json.dumps({"instance_id": iid, "holds": ok, "gold": gold.score, "empty": empty.score}),
                          flush=True)
                err_console.print(f"[{len(done) // 2}/{len(tasks)}] {iid}: "
                                  + ("[green]holds[/]" if ok else "[red]BROKEN[/]"), highlight=False)

        results = reward_many(pairs, sandbox=box, trees=DatasetTrees(Path(dataset)), settings=settings,
                              on_result=verdict)
    elapsed = time.monotonic() - start
    table = Table(title=f"taskforge validate ({box.name} sandbox, {elapsed:.1f}s)")
    for head in ("instance_id", "gold", "empty", "verdict"):
        table.add_column(head, overflow="fold")
    bad: list[str] = []
    for i, task in enumerate(tasks):
        gold, empty = results[2 * i], results[2 * i + 1]
        ok = _holds(gold, empty)
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


def _decisive(task: Any) -> Any:
    """The task as its empty-patch grading needs it: the FAIL_TO_PASS tests alone. That grading must score 0 with
    no FAIL_TO_PASS test passing (``_holds``), and the PASS_TO_PASS tests decide neither (a grading passes only
    when every FAIL_TO_PASS test does). cattrs 26.2.1: each of a task's 2 gradings ran all 929 PASS_TO_PASS
    tests, and `validate` checked 8 of 10 tasks within the corpus bench's 15 CPU-minutes."""
    return dataclasses.replace(task, pass_to_pass=())


def _holds(gold: Any, empty: Any) -> bool:
    return bool(gold.score == 1.0 and empty.score == 0.0 and empty.fraction == 0.0)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
