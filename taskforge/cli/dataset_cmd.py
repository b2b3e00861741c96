"""``taskforge show|stats|export DIR``: look into a task dataset and export it for other tools."""

from __future__ import annotations

import enum
import json
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from taskforge.cli._common import ADVANCED, console, user_errors
from taskforge.core.errors import ConfigError

DatasetDir = Annotated[Path, typer.Argument(help="Dataset directory (manifest.json, data/, repos/).")]
RepoOpt = Annotated[str | None, typer.Option(help="Only tasks of this repository.")]
StrategyOpt = Annotated[str | None, typer.Option(help="Only tasks of this strategy (stub | delete | module).")]
TierOpt = Annotated[int | None, typer.Option(help="Only tasks of this difficulty tier (0, 1, 2).")]


class ExportFormat(enum.StrEnum):
    harbor = "harbor"
    swebench = "swebench"
    verl = "verl"


def _where(repo: str | None, strategy: str | None, tier: int | None, min_score: float | None = None,
           max_score: float | None = None):  # noqa: ANN202 - a pyarrow expression or None
    from taskforge.dataset import task_filter

    return task_filter(repo=repo, strategy=strategy, tier=tier, min_score=min_score, max_score=max_score)


def show(
    dataset: DatasetDir,
    instance_id: Annotated[str | None, typer.Argument(help="Show this task in full.")] = None,
    repo: RepoOpt = None,
    strategy: StrategyOpt = None,
    tier: TierOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="Rows in the table.")] = 50,
) -> None:
    """A table of the tasks in DATASET, or one task with its statement, patches and tests."""
    from taskforge.dataset import Dataset

    with user_errors():
        ds = Dataset.open(dataset)
        if instance_id is not None:
            _show_one(ds.get(instance_id))
            return
        cols = ["instance_id", "repo", "strategy", "difficulty_tier", "difficulty_score", "FAIL_TO_PASS",
                "PASS_TO_PASS", "audit_passed"]
        rows = ds.table(columns=cols, where=_where(repo, strategy, tier)).to_pylist()
    table = Table(title=f"{dataset}: {len(rows)} of {len(ds)} tasks")
    for col in ("instance id", "repo", "strategy", "tier", "score", "F2P", "P2P", "audit"):
        # an id is shown whole, never "…": in a narrow terminal it folds onto more lines, the short columns keep
        # their width (they were squeezed to two letters a line before)
        short = col != "instance id"
        table.add_column(col, justify="right" if col in ("tier", "score", "F2P", "P2P") else "left",
                         overflow="fold", no_wrap=short, min_width=len(col) if short else 16)
    for r in sorted(rows, key=lambda r: r["instance_id"])[:limit]:
        table.add_row(r["instance_id"], r["repo"], r["strategy"], str(r["difficulty_tier"]),
                      f"{r['difficulty_score']:.2f}", str(len(json.loads(r["FAIL_TO_PASS"]))),
                      str(len(json.loads(r["PASS_TO_PASS"]))), "ok" if r["audit_passed"] else "LEAK")
    console.print(table)
    if len(rows) > limit:
        console.print(f"... {len(rows) - limit} more (use --limit)", highlight=False)


def _show_one(task) -> None:  # noqa: ANN001 - a Task
    d = task.difficulty
    console.print(Panel(
        f"[bold]{task.instance_id}[/]\nrepo {task.repo} {task.version} @ {task.base_commit[:12]}  source {task.source}\n"
        f"strategy {task.strategy}  entities {', '.join(task.entities)}\n"
        f"difficulty tier {d.tier} score {d.score:.3f}  (lines {d.lines_deleted}, complexity {d.complexity}, "
        f"fan-in {d.fan_in}, files {d.files_touched})\naudit {'passed' if task.audit.passed else 'LEAK FOUND'}  "
        f"validation runs {len(task.validation)}", title="task", highlight=False))
    console.print(Panel(task.problem_statement, title="problem statement"))
    for title, ids in (("FAIL_TO_PASS", task.fail_to_pass), ("PASS_TO_PASS", task.pass_to_pass)):
        console.rule(f"{title} ({len(ids)})")
        for test_id in ids or ("-",):  # one id a line, whole (no panel border to cut or fold it)
            console.print(test_id, highlight=False, markup=False, soft_wrap=True)
    for name, patch in (("setup_patch (original -> broken)", task.setup_patch), ("patch (gold)", task.patch),
                        ("test_patch (hidden tests)", task.test_patch)):
        console.print(Panel(Syntax(patch or "-", "diff", word_wrap=True), title=name))


def stats(
    dataset: DatasetDir,
    as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as one JSON object.")] = False,
) -> None:
    """Counts by repository, strategy and difficulty tier; a histogram of difficulty; the rejection funnel."""
    from taskforge.dataset import Dataset, FunnelTotals, read_funnel
    from taskforge.dataset.card import histogram

    with user_errors():
        ds = Dataset.open(dataset)
        rows = ds.table(columns=["repo", "strategy", "difficulty_tier", "difficulty_score"]).to_pylist()
        totals = FunnelTotals.of(read_funnel(ds.root).values())
    by = {k: dict(sorted(Counter(str(r[c]) for r in rows).items()))
          for k, c in (("by_repo", "repo"), ("by_strategy", "strategy"), ("by_tier", "difficulty_tier"))}
    scores = [r["difficulty_score"] for r in rows]
    if as_json:
        print(json.dumps({"tasks": len(rows), **by, "difficulty_histogram": histogram(scores).splitlines(),
                          "funnel": {"candidates": totals.candidates, "accepted": totals.accepted,
                                     "rejected": dict(totals.rejected)}}))
        return
    console.print(f"[bold]{dataset}[/]: {len(rows)} tasks, {len(ds.manifest.shards)} shards, "
                  f"schema v{ds.manifest.schema_version}", highlight=False)
    for title, counts in by.items():
        table = Table(title=title.replace("_", " "))
        table.add_column(title.split("_")[1])
        table.add_column("tasks", justify="right")
        for k, v in counts.items():
            table.add_row(k, str(v))
        console.print(table)
    console.print(Panel(histogram(scores), title="difficulty score", expand=False))
    if totals.candidates:
        funnel = Table(title="rejection funnel")
        funnel.add_column("stage")
        funnel.add_column("count", justify="right")
        funnel.add_row("candidates", str(totals.candidates))
        for reason, n in totals.rejected.items():
            funnel.add_row(f"rejected: {reason}", str(n))
        funnel.add_row("accepted", str(totals.accepted))
        console.print(funnel)


def export(
    dataset: DatasetDir,
    fmt: Annotated[ExportFormat, typer.Option("--format", "-f", help="harbor | swebench | verl.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")],
    repo: RepoOpt = None,
    strategy: StrategyOpt = None,
    tier: TierOpt = None,
    min_score: Annotated[float | None, typer.Option(help="Only tasks at least this hard.")] = None,
    max_score: Annotated[float | None, typer.Option(help="Only tasks at most this hard.")] = None,
    base_image: Annotated[str | None, typer.Option(help="harbor: FROM image (default: the task's image, else "
                                                        "the base_image setting).", rich_help_panel=ADVANCED)] = None,
    ca_bundle: Annotated[Path | None, typer.Option(help="harbor: CA bundle for pip inside the image (default: "
                                                        "the ca_bundle setting / PIP_CERT).",
                                                   rich_help_panel=ADVANCED)] = None,
    pip: Annotated[bool | None, typer.Option("--pip/--no-pip", help="harbor: pip install env_frozen in the image "
                                             "(default: unless FROM the task's own image).",
                                             rich_help_panel=ADVANCED)] = None,
    agent_timeout: Annotated[float, typer.Option(help="harbor: agent timeout, seconds.",
                                                 rich_help_panel=ADVANCED)] = 1800.0,
    verifier_timeout: Annotated[float, typer.Option(help="harbor: verifier timeout, seconds.",
                                                    rich_help_panel=ADVANCED)] = 900.0,
    memory_mb: Annotated[int, typer.Option(help="harbor: container memory, MB.", rich_help_panel=ADVANCED)] = 2048,
    cpus: Annotated[int, typer.Option(help="harbor: container CPUs.", rich_help_panel=ADVANCED)] = 1,
    network: Annotated[str, typer.Option(help="harbor: how the agent loses its network: 'policy' (Harbor's "
                                              "no-network policy; its docker provider pulls two helper images) "
                                              "or 'compose' (docker network_mode none; for offline hosts).",
                                         rich_help_panel=ADVANCED)] = "policy",
    val_fraction: Annotated[float, typer.Option(help="verl: share of tasks in test.parquet (seeded by instance id).",
                                                rich_help_panel=ADVANCED)] = 0.0,
    seed: Annotated[int, typer.Option(help="verl: seed of the train/test split.", rich_help_panel=ADVANCED)] = 0,
) -> None:
    """Export DATASET as Harbor task directories, SWE-bench JSONL, or verl parquet."""
    from taskforge.core.settings import Settings
    from taskforge.dataset import Dataset

    with user_errors():
        ds = Dataset.open(dataset)
        tasks = ds.tasks(_where(repo, strategy, tier, min_score, max_score))
        if fmt is ExportFormat.harbor:
            from taskforge.dataset.export_harbor import HarborOptions, export_harbor

            settings = Settings.load()
            if network not in ("policy", "compose"):
                raise ConfigError(f"--network must be 'policy' or 'compose', got {network!r}")
            ca = str(ca_bundle) if ca_bundle else settings.effective_ca_bundle
            options = HarborOptions(base_image=base_image or "", fallback_image=settings.base_image,
                                    install_requirements=pip, ca_bundle=ca,
                                    agent_timeout_s=agent_timeout, verifier_timeout_s=verifier_timeout,
                                    memory_mb=memory_mb, cpus=cpus, network=network,
                                    monitor_zero=settings.monitor_zero)
            paths = export_harbor(ds, out, options, tasks)
            console.print(f"{len(paths)} Harbor task directories in {out} (run: harbor run -p {out}/<task> "
                          "-a oracle)", highlight=False, soft_wrap=True)
        elif fmt is ExportFormat.swebench:
            from taskforge.dataset.export_swebench import export_swebench

            path = export_swebench(ds, out, tasks)
            console.print(f"{len(tasks)} SWE-bench rows in {path}", highlight=False, soft_wrap=True)
        else:
            from taskforge.dataset.export_verl import export_verl

            paths = export_verl(ds, out, val_fraction=val_fraction, seed=seed, tasks=tasks)
            console.print(f"{len(tasks)} tasks as verl parquet: {', '.join(str(p) for p in paths)}",
                          highlight=False, soft_wrap=True)


def recover(dataset: DatasetDir) -> None:
    """Make the dataset of a killed `generate` readable: adopt its whole shards, add its journal's tasks."""
    from taskforge.pipeline.recover import recover as run_recover

    with user_errors():
        if not dataset.is_dir():
            raise ConfigError(f"{dataset} is not a directory; give the --out folder of a generate run")
        done = run_recover(dataset)
    note = f", {done.without_archive} left out (repository archive missing)" if done.without_archive else ""
    console.print(f"dataset: {dataset} ({done.tasks} tasks; {done.from_journal} recovered from the journal{note})",
                  highlight=False)


def register(app: typer.Typer) -> None:
    app.command("recover")(recover)
    app.command("show")(show)
    app.command("stats")(stats)
    app.command("export")(export)
