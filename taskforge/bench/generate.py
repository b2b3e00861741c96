"""Generation throughput: the same candidates validated in two modes, side by side in one run.

    taskforge bench generate [SOURCE...] [--max-candidates 6] [--json]

For every source (default: a fixed set of small real PyPI packages) the profile is built once (its cost is
reported, not charged to either mode), then the same ranked candidates are validated twice, synchronously
in this process:

- ``naive``: every check runs the full suite, every grading grades every test, every run gets a fresh
  copy of the environment (``taskforge.validate.steps`` mode ``naive``);
- ``default``: cheapest checks first, coverage-selected tests, one environment per repository.

Tasks go to an in-memory sink instead of the dataset writer (parquet, card figures: a per-dataset cost,
not validation). CPU is user + sys of this process and its children (``resource.getrusage`` SELF + CHILDREN), measured
around each mode, so a machine loaded by others inflates wall time but not the comparison. The unit
"one full-suite run" is the CPU of one plain whole-suite run of the repository through its sandbox
(median of 3). Printed per mode: validated tasks per CPU-minute; per repository: CPU of one accepted
task in full-suite runs. Both modes must accept the same tasks (``agree``).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

DEFAULT_SOURCES = ("pypi:inflection==0.5.1", "pypi:parse==1.22.4", "pypi:itsdangerous==2.2.0")  # jmespath: its sdist lacks tests/__init__.py
MODES = ("naive", "default")


def cpu_seconds() -> float:
    """user + sys CPU of this process and all its descendants, waited-for or still alive.

    ``getrusage`` covers this process and the children it has reaped; long-lived helpers (the warm test
    servers of ``sandboxes.warm``) are still alive, so their CPU (and that of the children *they*
    reaped) is read from ``/proc``.
    """
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + _live_descendants_cpu()


def _live_descendants_cpu() -> float:
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(stat.parent.name)
        parent[pid] = int(fields[1])
        ticks[pid] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    me = os.getpid()
    total = 0
    for pid in parent:
        p, seen = parent.get(pid, 0), 0
        while p > 1 and p != me and seen < 64:
            p, seen = parent.get(p, 0), seen + 1
        if p == me and pid != me:
            total += ticks[pid]
    return total / os.sysconf("SC_CLK_TCK")


def suite_cpu(profile: Any, settings: Any, repeats: int = 3) -> float:
    """CPU seconds of one plain whole-suite run of the repository (median of ``repeats``)."""
    from sandboxes.protocol import RunRequest
    from taskforge.validate.worker import sandbox_for

    sandbox = sandbox_for(settings.to_dict(), warm=False)  # the unit: a plain run, as the baseline's
    samples = []
    with tempfile.TemporaryDirectory(prefix="tf-bench-suite-") as tmp:
        ws = Path(tmp, "ws")
        shutil.copytree(profile.repo_dir, ws, ignore=shutil.ignore_patterns(".git"), symlinks=True)
        for _ in range(repeats):
            before = cpu_seconds()
            sandbox.run(profile.env, ws, RunRequest(timeout_s=settings.test_timeout_s))
            samples.append(cpu_seconds() - before)
    return statistics.median(samples)


def measure(sources: Sequence[str], settings: Any, max_candidates: int, strategies: tuple[str, ...],
            say: Any = print) -> dict[str, Any]:
    """Profile each source once, then validate its first ``max_candidates`` candidates in both modes."""
    from taskforge.pipeline.executors import SyncExecutor
    from taskforge.pipeline.generate import GenerateOptions, ProfileJob, profile_source, run_source
    from taskforge.validate.worker import load_profile

    repos: list[dict[str, Any]] = []
    totals = {m: {"cpu": 0.0, "tasks": 0, "suite_units": 0.0, "wall": 0.0} for m in MODES}
    with tempfile.TemporaryDirectory(prefix="tf-bench-generate-") as tmp:
        for source in sources:
            t0, c0 = time.monotonic(), cpu_seconds()
            prof_out = profile_source(ProfileJob(source, settings.to_dict()))
            if prof_out.error:
                raise typer.BadParameter(f"{source}: {prof_out.error}")
            profile_cpu = cpu_seconds() - c0
            prof = load_profile(prof_out.profile_dir)
            unit = suite_cpu(prof, settings)
            say(f"{source}: profiled ({profile_cpu:.1f} CPU-s), one full-suite run = {unit:.2f} CPU-s")
            row: dict[str, Any] = {"source": source, "profile_cpu_s": round(profile_cpu, 2),
                                   "profile_wall_s": round(time.monotonic() - t0, 2), "suite_cpu_s": round(unit, 3)}
            accepted: dict[str, list[str]] = {}
            for mode in MODES:
                out = Path(tmp, f"{prof.snapshot.slug}-{mode}")
                options = GenerateOptions(strategies=strategies, max_candidates=max_candidates, mode=mode)
                start, c1 = time.monotonic(), cpu_seconds()
                sink = _TaskSink()
                summary = run_source(prof_out, out, settings, options, SyncExecutor(), sink, lambda _e, _d: None)
                cpu, wall = cpu_seconds() - c1, time.monotonic() - start
                accepted[mode] = sorted(t.instance_id for t in sink.tasks)
                tasks = summary.tasks
                units = cpu / unit if unit > 0 else 0.0
                row[mode] = {"tasks": tasks, "candidates": min(max_candidates, summary.candidates),
                             "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                             "suite_runs_per_task": round(units / tasks, 2) if tasks else None,
                             "funnel": summary.funnel}
                totals[mode]["cpu"] += cpu
                totals[mode]["wall"] += wall
                totals[mode]["tasks"] += tasks
                totals[mode]["suite_units"] += units
                say(f"  {mode:7s}: {tasks} tasks, {cpu:.1f} CPU-s, {wall:.0f} s wall, "
                    f"{row[mode]['suite_runs_per_task']} suite runs per task")
            row["agree"] = accepted["naive"] == accepted["default"]
            repos.append(row)
    per_min = {m: (totals[m]["tasks"] / (totals[m]["cpu"] / 60.0) if totals[m]["cpu"] else 0.0) for m in MODES}
    d = totals["default"]
    return {
        "tasks_per_cpu_min_naive": round(per_min["naive"], 3),
        "tasks_per_cpu_min": round(per_min["default"], 3),
        "speedup_vs_naive": round(per_min["default"] / per_min["naive"], 2) if per_min["naive"] else None,
        "suite_runs_per_task": round(d["suite_units"] / d["tasks"], 2) if d["tasks"] else None,
        "suite_runs_per_task_naive": (round(totals["naive"]["suite_units"] / totals["naive"]["tasks"], 2)
                                      if totals["naive"]["tasks"] else None),
        "tasks": d["tasks"], "agree": all(r["agree"] for r in repos),
        "cpu_s": {m: round(totals[m]["cpu"], 2) for m in MODES},
        "wall_s": {m: round(totals[m]["wall"], 2) for m in MODES},
        "load_avg": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
        "max_candidates": max_candidates, "repos": repos,
    }


class _TaskSink:
    """Stands in for the dataset writer: the benchmark measures validation, not parquet and card rendering."""

    def __init__(self) -> None:
        self.tasks: list[Any] = []

    def add_repo_archive(self, *args: Any) -> None:
        return None

    def add(self, task: Any) -> None:
        self.tasks.append(task)

    def flush(self) -> None:
        return None

    def record_run(self, *args: Any) -> None:
        return None


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("generate")
    def generate_cmd(
        sources: Annotated[list[str] | None, typer.Argument(help="Sources (default: a fixed set of PyPI packages).")] = None,
        max_candidates: Annotated[int, typer.Option(min=1, help="Ranked candidates validated per source and mode.")] = 6,
        strategies: Annotated[str, typer.Option(help="Comma-separated strategies.")] = "stub,delete,module",
        work_dir: Annotated[Path | None, typer.Option(help="Work area (profiles, environments).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object as the last line.")] = False,
    ) -> None:
        """Validated tasks per CPU-minute, naive vs default, and the CPU of one task in full-suite runs."""
        from taskforge.cli._common import err_console, settings_from, user_errors

        with user_errors():
            settings = settings_from(work_dir=work_dir, jobs=1)
            load_before = os.getloadavg()
            result = measure(tuple(sources or DEFAULT_SOURCES), settings, max_candidates,
                             tuple(s.strip() for s in strategies.split(",") if s.strip()),
                             say=lambda m: err_console.print(m, highlight=False))
        result["load_avg_start"] = [round(x, 2) for x in load_before]
        for mode, key in (("naive", "tasks_per_cpu_min_naive"), ("default", "tasks_per_cpu_min")):
            typer.echo(f"{mode:7s}: {result[key]:.3f} validated tasks per CPU-minute "
                       f"({result['cpu_s'][mode]:.1f} CPU-s, {result['wall_s'][mode]:.0f} s wall)")
        typer.echo(f"speedup vs naive: {result['speedup_vs_naive']}x; one accepted task costs "
                   f"{result['suite_runs_per_task']} full-suite runs (naive {result['suite_runs_per_task_naive']}); "
                   f"modes agree: {result['agree']}; load average {result['load_avg']} on {result['cpus']} CPUs")
        if as_json:
            print(json.dumps(result), flush=True)
