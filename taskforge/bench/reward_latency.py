"""Grading latency: grade one task's gold patch N times through ``reward`` and report p50/p95.

    taskforge bench reward-latency DATASET [INSTANCE_ID] [--n 20] [--sandbox local,local-unsafe,docker]

Every grading is a full reward run (fresh workspace from the dataset archive, patch vetting, restore,
canaries, sandbox run); the prepared environment is reused, as in training. The first grading (which
may build the environment) is reported separately and left out of the percentiles.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Annotated, Any

import typer


def measure(dataset: Path, instance_id: str | None, n: int, sandbox_name: str, jobs: int) -> dict[str, Any]:
    from sandboxes.selection import make_sandbox
    from taskforge.core.settings import Settings
    from taskforge.dataset import Dataset
    from taskforge.reward.reward import EnvCache, reward, reward_many
    from taskforge.reward.workspace import DatasetTrees

    ds = Dataset.open(dataset)
    task = ds.get(instance_id) if instance_id else ds.tasks()[0]
    settings = Settings.load({"sandbox": sandbox_name})
    sandbox = make_sandbox(settings)
    trees = DatasetTrees(dataset)
    envs = EnvCache()
    start = time.monotonic()
    warm = reward(task, task.patch, sandbox=sandbox, trees=trees, settings=settings, envs=envs)
    first = time.monotonic() - start
    if warm.score != 1.0:
        raise SystemExit(f"gold patch of {task.instance_id} scored {warm.score} ({warm.flags}: {warm.detail})")
    totals: list[float] = []
    runs: list[float] = []
    if jobs <= 1:
        for _ in range(n):
            r = reward(task, task.patch, sandbox=sandbox, trees=trees, settings=settings, envs=envs)
            assert r.score == 1.0, r
            totals.append(r.timings["total_s"])
            runs.append(r.timings["run_s"])
    else:
        t0 = time.monotonic()
        results = reward_many([(task, task.patch)] * n, sandbox=sandbox, trees=trees, settings=settings, jobs=jobs)
        assert all(r.score == 1.0 for r in results)
        totals = [r.timings["total_s"] for r in results]
        runs = [r.timings["run_s"] for r in results]
        first = time.monotonic() - t0
    q = statistics.quantiles(totals, n=20) if len(totals) >= 2 else totals * 19
    return {"instance_id": task.instance_id, "sandbox": sandbox.name, "n": n, "jobs": jobs,
            "first_s": round(first, 3), "p50_s": round(statistics.median(totals), 3), "p95_s": round(q[18], 3),
            "run_p50_s": round(statistics.median(runs), 3), "tests": len(task.fail_to_pass) + len(task.pass_to_pass)}


def compare(dataset: Path, instance_id: str | None, n: int, sandboxes: list[str], jobs: int) -> dict[str, Any]:
    """``measure`` on each sandbox; ``isolation_cost_s``: confined ``local`` p50 minus ``local-unsafe`` p50."""
    import os

    rows = [measure(dataset, instance_id, n, name, jobs) for name in sandboxes]
    by = {r["sandbox"]: r for r in rows}
    out: dict[str, Any] = {"rows": rows, "load_1min": round(os.getloadavg()[0], 2)}
    if "local" in by and "local-unsafe" in by:
        out["isolation_cost_s"] = round(by["local"]["p50_s"] - by["local-unsafe"]["p50_s"], 3)
    if "docker" in by and "local-unsafe" in by:
        out["docker_cost_s"] = round(by["docker"]["p50_s"] - by["local-unsafe"]["p50_s"], 3)
    return out


def reward_latency(
    dataset: Annotated[Path, typer.Argument(help="A dataset directory (taskforge generate --out).")],
    instance_id: Annotated[str | None, typer.Argument(help="Task to grade (default: the first).")] = None,
    n: Annotated[int, typer.Option("--n", help="Gradings per sandbox (after one warm-up).")] = 20,
    sandbox: Annotated[str, typer.Option("--sandbox", help="Comma-separated sandboxes to compare.")]
    = "local,local-unsafe,docker",
    jobs: Annotated[int, typer.Option("--jobs", help="Gradings in parallel.")] = 1,
) -> None:
    """What a grading costs per sandbox (p50/p95 of the gold patch's full reward run), and what the
    isolation of the confined local sandbox and of docker adds over an unconfined run."""
    print(json.dumps(compare(dataset, instance_id, n, [s for s in sandbox.split(",") if s], jobs), indent=2))


def register(bench_app: typer.Typer) -> None:
    bench_app.command("reward-latency")(reward_latency)


if __name__ == "__main__":
    typer.run(reward_latency)
