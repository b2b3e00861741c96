"""``taskforge mine SOURCE... --out DIR``: mine repositories and profile their test suites.

Each source's profile is written to ``DIR/<name>-<version>/`` (format: ``datasets/PROFILE_FORMAT.md``).
One bad source never stops the others; the exit code is 1 when any source failed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from taskforge.cli._common import ADVANCED, console, err_console, settings_from
from taskforge.core.errors import TaskforgeError

SUMMARY_KEYS = ("tests_passed", "tests_failed", "tests_flaky", "tests_skipped", "entities",
                "covered_entities", "coverage_percent", "seconds")


def mine(
    sources: Annotated[list[str], typer.Argument(help="Local path, git URL, or pypi:NAME==VERSION (several allowed).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the profiles (one subfolder per source).")],
    rev: Annotated[str | None, typer.Option(help="Branch, tag or sha of a git source.")] = None,
    runs: Annotated[int | None, typer.Option(min=1, help="Full-suite runs on pristine code (flaky detection).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per source instead of a table.")] = False,
    sandbox: Annotated[str | None, typer.Option(help="local | docker | auto.", rich_help_panel=ADVANCED)] = None,
    work_dir: Annotated[Path | None, typer.Option(help="Work area (repos, envs, sdists), reused across runs.",
                                                  rich_help_panel=ADVANCED)] = None,
    test_timeout: Annotated[float | None, typer.Option(help="Seconds one suite run may take.",
                                                       rich_help_panel=ADVANCED)] = None,
) -> None:
    """Mine SOURCE(s): pin a commit, build the environment, run the suite N times, map coverage, index code."""
    from sandboxes.selection import make_sandbox
    from taskforge.profile.build import build_profile

    try:
        settings = settings_from(work_dir=work_dir, sandbox=sandbox, baseline_runs=runs,
                                 test_timeout_s=test_timeout)
        box = make_sandbox(settings)
    except TaskforgeError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None

    rows: list[tuple[str, dict[str, object], str]] = []
    failures = 0
    for source in sources:
        try:
            profile = build_profile(source, settings, box, rev=rev,
                                    progress=lambda m: err_console.print(f"[dim]{m}[/]", highlight=False))
            target = profile.save(Path(out) / profile.snapshot.slug)
        except OSError as exc:
            failures += 1
            err_console.print(f"[bold red]error:[/] {source}: cannot write the profile under {out} ({exc}); "
                              "choose another --out", highlight=False, soft_wrap=True)
            continue
        except TaskforgeError as exc:
            failures += 1
            err_console.print(f"[bold red]error:[/] {source}: {exc}", highlight=False, soft_wrap=True)
            continue
        except Exception as exc:  # noqa: BLE001 - a bug on one source must not stop the others
            failures += 1
            err_console.print(f"[bold red]internal error:[/] {source}: {type(exc).__name__}: {exc}",
                              highlight=False, soft_wrap=True)
            continue
        for note in profile.spec.notes:
            if "not mapped" in note or "will not collect" in note:
                err_console.print(f"[yellow]warning:[/] {source}: {note}", highlight=False, soft_wrap=True)
        if profile.baseline.collection_errors:
            err_console.print(f"[yellow]warning:[/] {source}: pytest could not collect "
                              f"{len(profile.baseline.collection_errors)} file(s), their tests are left out: "
                              f"{', '.join(profile.baseline.collection_errors[:8])}", highlight=False, soft_wrap=True)
        check = profile.baseline.grading_check
        if check is not None and check.status != "passed":
            err_console.print(f"[yellow]warning:[/] {source}: {escape(check.line)}", highlight=False, soft_wrap=True)
        summary = profile.summary()
        rows.append((source, summary, str(target)))
        if as_json:
            print(json.dumps({**summary, "profile_dir": str(target)}), flush=True)
    if not as_json and rows:
        console.print(_table(rows))
        for source, _summary, where in rows:
            console.print(f"profile of {source}: {where}", highlight=False, soft_wrap=True)
    if failures:
        raise typer.Exit(1)


def _table(rows: list[tuple[str, dict[str, object], str]]) -> Table:
    table = Table(title="taskforge mine", show_lines=False)
    table.add_column("source", overflow="fold")
    for head in ("passed", "failed", "flaky", "skipped", "coverage %", "entities", "covered", "seconds"):
        table.add_column(head, justify="right")
    for source, s, _target in rows:
        table.add_row(source, *(str(s[k]) for k in ("tests_passed", "tests_failed", "tests_flaky",
                                                     "tests_skipped", "coverage_percent", "entities",
                                                     "covered_entities", "seconds")))
    return table


def register(app: typer.Typer) -> None:
    app.command("mine")(mine)
