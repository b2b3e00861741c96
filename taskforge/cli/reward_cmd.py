"""``taskforge reward DATASET INSTANCE_ID --patch FILE``: grade one patch the way trainers do."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from taskforge.cli._common import ADVANCED, console, settings_from, user_errors
from taskforge.core.errors import PatchError


def register(app: typer.Typer) -> None:
    app.command("reward")(reward_command)


def reward_command(
    dataset: Annotated[Path, typer.Argument(help="Dataset directory (manifest.json, data/, repos/).")],
    instance_id: Annotated[str, typer.Argument(help="Task to grade against.")],
    patch: Annotated[Path, typer.Option("--patch", help="Unified diff against the broken workspace ('-' = stdin).")],
    sandbox: Annotated[str, typer.Option(help="Backend: local | docker | auto.")] = "local",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object as the last line.")] = False,
    timeout: Annotated[float | None, typer.Option(help="Wall-clock limit of the test run (s).",
                                                  rich_help_panel=ADVANCED)] = None,
) -> None:
    """Grade PATCH on one task: hidden tests + kept tests + tamper canaries in a fresh sandbox."""
    with user_errors():
        from sandboxes.selection import make_sandbox
        from taskforge.dataset import Dataset
        from taskforge.reward.reward import reward
        from taskforge.reward.workspace import DatasetTrees

        if str(patch) == "-":
            text = sys.stdin.read()
        else:
            if not patch.is_file():
                raise PatchError(f"patch file {patch} does not exist; pass a unified diff with --patch FILE")
            text = patch.read_text(encoding="utf-8", errors="surrogateescape")
        settings = settings_from(sandbox=sandbox)
        task = Dataset.open(dataset).get(instance_id)
        result = reward(task, text, sandbox=make_sandbox(settings), trees=DatasetTrees(dataset),
                        settings=settings, timeout_s=timeout)
        if as_json:
            print(json.dumps(result.to_dict(), sort_keys=True))
            return
        table = Table(title=f"reward {task.instance_id}")
        for col in ("reward", "hidden tests passed", "kept tests passed", "flags", "seconds"):
            table.add_column(col)
        table.add_row(f"{result.score:.1f}", f"{result.fraction:.0%}", f"{result.pass_to_pass_fraction:.0%}",
                      ", ".join(result.flags) or "-", f"{result.timings.get('total_s', 0.0):.1f}")
        console.print(table)
        if result.detail:
            console.print(f"[dim]{result.detail}[/]", highlight=False)
