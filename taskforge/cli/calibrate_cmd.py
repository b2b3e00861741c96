"""``taskforge calibrate DIR --policy ...``: per-task difficulty from graded outcomes (``taskforge.rl.calibrate``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from taskforge.cli._common import ADVANCED, err_console, settings_from, user_errors
from taskforge.core.errors import ConfigError


def parse_policy(spec: str, seed: int) -> tuple[str, Any]:
    """``name`` or ``name:key=value,...`` (``PolicyOptions`` fields) -> (respondent label, PolicyOptions)."""
    from taskforge.rl.policies import PolicyOptions

    name, _, opts = spec.partition(":")
    types = {f.name: f.type for f in dataclasses.fields(PolicyOptions)}
    values: dict[str, Any] = {"seed": seed}
    for pair in filter(None, (p.strip() for p in opts.split(","))):
        key, sep, raw = pair.partition("=")
        if not sep or key not in types or key in ("workspace", "extra"):
            raise ConfigError(f"--policy {spec!r}: expected NAME:KEY=VALUE,... with KEY one of "
                              f"{', '.join(k for k in types if k not in ('workspace', 'extra'))}")
        kind = str(types[key])
        try:
            values[key] = int(raw) if kind == "int" else float(raw) if kind == "float" else raw
        except ValueError:
            raise ConfigError(f"--policy {spec!r}: {key} expects a {kind}, got {raw!r}") from None
    return spec, PolicyOptions(**values)


def calibrate_command(
    dataset: Annotated[Path, typer.Argument(help="Dataset directory (the --out of `taskforge generate`).")],
    policy: Annotated[list[str], typer.Option(
        help="A respondent: NAME or NAME:KEY=VALUE,... (repeatable), e.g. simulated:skill=3 oracle null.")],
    rollouts: Annotated[int, typer.Option(help="Graded rollouts per task per policy.")] = 8,
    grader: Annotated[str, typer.Option(
        help="sandbox: the real reward path; fake: reward 1 iff the patch is the gold patch "
             "(exact for simulated, oracle and null).")] = "sandbox",
    write: Annotated[bool, typer.Option(help="Write the fitted difficulties back to the dataset.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Last line: one JSON object.")] = False,
    sandbox: Annotated[str | None, typer.Option(help="Grading backend: local | docker | auto.",
                                                rich_help_panel=ADVANCED)] = None,
    jobs: Annotated[int | None, typer.Option(help="Parallel gradings.", rich_help_panel=ADVANCED)] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the policies.", rich_help_panel=ADVANCED)] = None,
    l2: Annotated[float, typer.Option(help="Penalty on difficulties (keeps always-passed tasks finite).",
                                      rich_help_panel=ADVANCED)] = 0.05,
) -> None:
    """Fit per-task difficulties (Rasch: P(pass) = sigmoid(skill - difficulty)) from graded rollouts."""
    with user_errors():
        from taskforge.rl.calibrate import calibrate_dataset, rank_agreement, write_fit
        from taskforge.rl.grading import FakeGrader, SandboxGrader
        from taskforge.rl.loop import load_tasks
        from taskforge.rl.policies import dataset_workspaces, make_policy

        if grader not in ("sandbox", "fake"):
            raise ConfigError(f"--grader must be sandbox or fake, got {grader!r}")
        settings = settings_from(sandbox=sandbox, jobs=jobs, seed=seed)
        tasks = load_tasks(dataset)
        respondents = []
        for spec in policy:
            label, options = parse_policy(spec, settings.seed)
            name = label.partition(":")[0]
            if name in ("command", "hf"):
                options = dataclasses.replace(options, workspace=dataset_workspaces(dataset))
            respondents.append((label, make_policy(name, options)))
        grading = FakeGrader() if grader == "fake" else SandboxGrader(dataset, settings)
        fit = calibrate_dataset(tasks, respondents, grading, rollouts=rollouts, l2_difficulty=l2)
        source = "calibrate:" + "+".join(policy)
        written = write_fit(dataset, fit, source) if write else 0
    agreement = rank_agreement(tasks, fit.difficulty)
    summary = {**fit.to_dict(), "written": written, "rank_agreement": agreement, "source": source}
    err_console.print(f"calibrated {len(fit.difficulty)} task(s) from {summary['observations']} graded rollouts; "
                      f"respondent skills {json.dumps({k: round(v, 2) for k, v in fit.ability.items()})}",
                      highlight=False)
    for strategy, row in agreement.items():
        err_console.print(f"  {strategy}: {row['tasks']} tasks, Spearman(static score, calibrated) = "
                          f"{row['spearman']}", highlight=False)
    if as_json:
        print(json.dumps(summary))


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_command)
