"""Per-run overhead of the docker sandbox: container create + copy-in + start/wait + read-back + remove,
over the raw test time the runner measures inside the container.

    taskforge bench docker-overhead --runs 20

Each run is one ``DockerSandbox`` run, phase by phase, on a small repository written for the purpose
(or ``--repo DIR`` with ``--spec``-less detection). Overhead = wall time of the run - the pytest session
time in its report. Target (issue 5): p50 overhead <= 1 s.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from taskforge.core.environment import EnvSpec
from taskforge.core.settings import Settings

_REPO = {
    "pyproject.toml": """
        [project]
        name = "benchpkg"
        version = "0.1.0"
        [tool.setuptools]
        packages = ["benchpkg"]
    """,
    "benchpkg/__init__.py": """
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
    """,
    "tests/test_fib.py": """
        import pytest
        from benchpkg import fib

        @pytest.mark.parametrize("n,want", [(0, 0), (1, 1), (10, 55), (20, 6765)])
        def test_fib(n, want):
            assert fib(n) == want
    """,
}
_SPEC = EnvSpec(project_name="benchpkg", python="3.11", install_target=".", package_dirs=("benchpkg",))


@dataclass(frozen=True, slots=True)
class RunTiming:
    create: float
    copy: float
    execute: float  # start + wait + read back (report, logs)
    remove: float
    wall: float
    test_time: float  # the pytest session, as the runner measured it

    @property
    def overhead(self) -> float:
        return self.wall - self.test_time


def measure(runs: int, settings: Settings, repo: Path | None = None, spec: EnvSpec | None = None,
            coverage: bool = False, vs_local: bool = True) -> dict[str, Any]:
    from sandboxes.docker import DockerSandbox
    from sandboxes.protocol import RunRequest

    with tempfile.TemporaryDirectory(prefix="taskforge-bench-") as tmp:
        if repo is None:
            repo = Path(tmp) / "repo"
            for rel, text in _REPO.items():
                (repo / rel).parent.mkdir(parents=True, exist_ok=True)
                (repo / rel).write_text(textwrap.dedent(text).lstrip())
        if spec is None:
            from generators.env_detect import detect_env

            spec = _SPEC if (repo / "benchpkg").is_dir() else detect_env(repo)
        box = DockerSandbox(settings)
        env = box.prepare(spec, repo)
        request = RunRequest(coverage=coverage, timeout_s=settings.test_timeout_s)
        box.run(env, repo, request)  # warm-up: page cache, image layers
        timings = [_timed_run(box, env, repo, request) for _ in range(runs)]
        local_walls = _local_walls(settings, spec, repo, request, runs) if vs_local else []
    overheads = sorted(t.overhead for t in timings)
    local_p50 = round(statistics.median(local_walls), 3) if local_walls else None
    return {
        "runs": runs,
        "image": env.location,
        "p50_overhead_s": round(statistics.median(overheads), 3),
        "p95_overhead_s": round(_percentile(overheads, 95), 3),
        "p50_wall_s": round(statistics.median(t.wall for t in timings), 3),
        "p50_test_s": round(statistics.median(t.test_time for t in timings), 3),
        "p50_phase_s": {k: round(statistics.median(getattr(t, k) for t in timings), 3)
                        for k in ("create", "copy", "execute", "remove")},
        "p50_local_wall_s": local_p50,  # the same run in the local sandbox, for reference
        # what docker adds over the local sandbox (both pay interpreter + pytest start-up)
        "p50_over_local_s": round(statistics.median(t.wall for t in timings) - local_p50, 3) if local_p50 else None,
        "load_avg_1m": round(os.getloadavg()[0], 2),  # CPU contention during the measurement
        "cpus": os.cpu_count(),
        "target_p50_overhead_s": 1.0,
        "timings": [asdict(t) for t in timings],
    }


def _timed_run(box: Any, env: Any, repo: Path, request: Any) -> RunTiming:
    """``DockerSandbox.run``, phase by phase."""
    t0 = time.monotonic()
    container = box._create(env, request)
    t1 = time.monotonic()
    try:
        box._copy_in(container, repo, box.request_payload(env.spec, request))
        t2 = time.monotonic()
        report, _ = box._execute(container, request)
        t3 = time.monotonic()
    finally:
        box._remove(container)
    t4 = time.monotonic()
    if not report.results:
        raise RuntimeError(f"benchmark run produced no results: {report.output_tail[-300:]}")
    return RunTiming(t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, report.duration)


def _local_walls(settings: Settings, spec: EnvSpec, repo: Path, request: Any, runs: int) -> list[float]:
    from sandboxes.local import LocalSandbox

    box = LocalSandbox(settings)
    env = box.prepare(spec, repo)
    box.run(env, repo, request)
    return [box.run(env, repo, request).seconds for _ in range(runs)]


def _percentile(sorted_values: list[float], pct: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    return statistics.quantiles(sorted_values, n=100, method="inclusive")[int(pct) - 1]


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("docker-overhead")
    def docker_overhead_cmd(
        runs: Annotated[int, typer.Option(help="Measured runs (after one warm-up run).")] = 20,
        repo: Annotated[Path | None, typer.Option(help="Repository to run (default: a small built-in one).")] = None,
        coverage: Annotated[bool, typer.Option(help="Collect per-test coverage in each run.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ) -> None:
        """Docker sandbox per-run overhead (create + copy + start + remove) over raw test time: p50/p95."""
        from rich.console import Console

        from taskforge.cli._common import settings_from, user_errors

        with user_errors():
            settings = settings_from(sandbox="docker")
            summary = measure(runs, settings, repo, coverage=coverage)
        if as_json:
            print(json.dumps({k: v for k, v in summary.items() if k != "timings"}))
            return
        console = Console()
        console.print(f"docker overhead over {runs} runs of {summary['image']}: "
                      f"p50 {summary['p50_overhead_s']:.3f}s, p95 {summary['p95_overhead_s']:.3f}s "
                      f"(target p50 <= 1s); p50 wall {summary['p50_wall_s']:.3f}s, "
                      f"p50 test time {summary['p50_test_s']:.3f}s; local sandbox p50 wall {summary['p50_local_wall_s']}s "
                      f"(docker adds {summary['p50_over_local_s']}s); phases p50 {summary['p50_phase_s']}; "
                      f"load average {summary['load_avg_1m']} on {summary['cpus']} CPUs")
