"""Report speed: time ``taskforge report`` on a 100-task dataset built from real tasks.

    python -m taskforge.bench.report_speed SOURCE_DATASET [--tasks 100] [--repos 4] [--train-log LOG] [--repeat 3]

The dataset is made by replicating SOURCE_DATASET's real tasks (new instance ids, repository names
and base commits, so the writer's de-duplication keeps them; difficulty features jittered with a
seeded RNG so histograms have a spread) through the real ``DatasetWriter``, with a copy of the
source's funnel per repository. Then ``taskforge report`` runs as a fresh process (interpreter start,
imports, reading, every figure's spec, the page) with a fresh work area: the first run is cold (a new
work area; the Vega JavaScript bundle is read from the package's ``vendor/`` copy, or built and
cached under ``<work_dir>/report-assets`` where that copy is missing), the next ``--repeat`` runs are
warm; wall and CPU seconds of both are reported.
The in-process split (collect / specs / bundle / html) is measured once more after the imports. The
browser's drawing of the figures is not part of it (tests/test_report_browser.py times that).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from taskforge.core.task import Task
from taskforge.dataset.funnel import read_funnel
from taskforge.dataset.reader import Dataset
from taskforge.dataset.writer import DatasetWriter


def replicate(task: Task, i: int, repo: str, rng: random.Random) -> Task:
    """A copy of ``task`` that the writer treats as new: other id, repo and base commit, jittered difficulty."""
    d = task.difficulty
    lines = max(1, round(d.lines_deleted * rng.uniform(0.3, 3.0)))
    difficulty = dataclasses.replace(d, lines_deleted=lines, score=round(min(1.0, max(0.0, d.score + rng.gauss(0, 0.15))), 4),
                                     tier=d.tier)
    commit = hashlib.sha1(f"{task.base_commit}-{repo}-{i}".encode()).hexdigest()
    return dataclasses.replace(task, instance_id=f"{repo}__{task.strategy}__{i:04d}-{commit[:8]}", repo=repo,
                               base_commit=commit, difficulty=difficulty)


def build_dataset(source: Path, dest: Path, n_tasks: int, n_repos: int, seed: int = 0) -> Path:
    """Write ``n_tasks`` replicated tasks over ``n_repos`` repositories into ``dest``; returns ``dest``."""
    real = Dataset.open(source).tasks()
    if not real:
        raise SystemExit(f"{source} has no tasks to replicate")
    runs = list(read_funnel(source).values())
    rng = random.Random(seed)
    repos = [f"{real[0].repo}-r{k}" for k in range(n_repos)]
    with DatasetWriter(dest, write_card=False) as writer:
        for i in range(n_tasks):
            writer.add(replicate(real[i % len(real)], i, repos[i % n_repos], rng))
        per_repo = -(-n_tasks // n_repos)
        for k, repo in enumerate(repos):
            for run in runs:
                scale = max(1, round(per_repo / max(1, run.accepted)))
                writer.record_run(dataclasses.replace(
                    run, run_id=f"{run.run_id}#{k}", repo=repo, source=f"{run.source}#{k}",
                    candidates=run.candidates * scale, accepted=run.accepted * scale,
                    rejected={r: c * scale for r, c in run.rejected.items()}, seconds=run.seconds * scale,
                    extra={**run.extra, "stage_seconds": {s: v * scale for s, v in
                                                          (run.extra.get("stage_seconds") or {}).items()}}))
    return dest


def _cli_once(dataset: Path, out: Path, train_log: Path | None, work_dir: Path) -> tuple[float, float]:
    argv = [sys.executable, "-c", "from taskforge.cli import main; main()", "report", str(dataset), "--out", str(out)]
    if train_log:
        argv += ["--train-log", str(train_log)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, start_new_session=True,
                          env={**os.environ, "TASKFORGE_WORK_DIR": str(work_dir)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"taskforge report failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def in_process(dataset: Path, train_log: Path | None, assets_dir: Path | None = None) -> dict[str, float]:
    from taskforge.report.data import ReportData
    from taskforge.report.figures import figure_specs
    from taskforge.report.html import render_html
    from taskforge.report.vega import javascript_bundle

    t0 = time.perf_counter()
    data = ReportData.collect(dataset, train_log)
    t1 = time.perf_counter()
    specs = figure_specs(data)
    t2 = time.perf_counter()
    bundle = javascript_bundle(assets_dir)
    t3 = time.perf_counter()
    page = render_html(data, specs, bundle)
    t4 = time.perf_counter()
    return {"collect_s": round(t1 - t0, 3), "specs_s": round(t2 - t1, 3), "bundle_s": round(t3 - t2, 3),
            "html_s": round(t4 - t3, 3), "figures": len(specs), "bytes": len(page.encode())}


def measure(source: Path, n_tasks: int, n_repos: int, train_log: Path | None, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="taskforge-report-bench-") as tmp:
        dataset = build_dataset(source, Path(tmp) / "ds", n_tasks, n_repos)
        work = Path(tmp) / "work"  # fresh: nothing cached from an earlier report
        cold_wall, cold_cpu = _cli_once(dataset, Path(tmp) / "report.html", train_log, work)
        runs = [_cli_once(dataset, Path(tmp) / "report.html", train_log, work) for _ in range(repeat)]
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        split = in_process(dataset, train_log, work / "report-assets")
    return {"tasks": n_tasks, "repos": n_repos, "train_log": bool(train_log), "repeat": repeat,
            "cold_wall_s": round(cold_wall, 3), "cold_cpu_s": round(cold_cpu, 3),
            "cli_wall_s_min": round(min(walls), 3), "cli_wall_s_max": round(max(walls), 3),
            "cli_cpu_s_min": round(min(cpus), 3), "cli_cpu_s_max": round(max(cpus), 3), "in_process": split,
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def register(bench_app: typer.Typer) -> None:
    """``taskforge bench report-speed`` (add this module to ``_BENCH_MODULES`` in ``taskforge/cli/bench_cmd.py``)."""
    @bench_app.command("report-speed")
    def report_speed_cmd(
        source: Annotated[Path, typer.Argument(help="A real dataset directory to replicate tasks from.")],
        tasks: Annotated[int, typer.Option(help="Tasks in the benchmark dataset.")] = 100,
        repos: Annotated[int, typer.Option(help="Repositories the tasks are spread over.")] = 4,
        train_log: Annotated[Path | None, typer.Option(help="A `taskforge train` log to plot as well.")] = None,
        repeat: Annotated[int, typer.Option(help="Timed warm runs of `taskforge report` (after one cold run).")] = 3,
    ) -> None:
        """Time `taskforge report` on a dataset of replicated real tasks (target: < 2 s for 100 tasks)."""
        print(json.dumps(measure(source, tasks, repos, train_log, repeat)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="A real dataset directory to replicate tasks from.")
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--repos", type=int, default=4)
    parser.add_argument("--train-log", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.source, args.tasks, args.repos, args.train_log, args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
