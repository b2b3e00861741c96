"""What a live agent session costs per tool call: median added latency, local jail and docker container.

    taskforge bench session --calls 30 [--backend local --backend docker]

One session per backend on a small built-in repository (``bench docker-overhead``'s), its environment
prepared by the backend as for a real task. Per tool, ``calls`` calls (after one warm-up) through
``Session.execute`` against the same operation done directly on this host, unconfined:

- ``bash true``: ``bash -c true`` as a subprocess;
- ``view_file``: reading the file and numbering its lines;
- ``str_replace``: read, replace, write back.

Added latency = median(session) - median(direct). For docker also ``docker exec true`` alone (the engine's
own floor for one exec, no wrapper).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from taskforge.core.settings import Settings

TOOLS = ("bash", "view_file", "str_replace")


def _timed(fn: Callable[[], Any], calls: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _direct(ws: Path) -> dict[str, Callable[[], Any]]:
    target = ws / "benchpkg" / "__init__.py"
    flip = {"n": 0}

    def replace() -> None:
        text = target.read_text()
        old, new = ("n < 2", "n <= 1") if flip["n"] % 2 == 0 else ("n <= 1", "n < 2")
        flip["n"] += 1
        target.write_text(text.replace(old, new, 1))

    return {"bash": lambda: subprocess.run(["bash", "-c", "true"], check=True, timeout=30),
            "view_file": lambda: "".join(f"{n:6}\t{ln}\n" for n, ln in enumerate(target.read_text().splitlines(), 1)),
            "str_replace": replace}


def _through(session: Any) -> dict[str, Callable[[], Any]]:
    from taskforge.agent.protocol import ToolCall

    flip = {"n": 0}

    def replace() -> None:
        old, new = ("n < 2", "n <= 1") if flip["n"] % 2 == 0 else ("n <= 1", "n < 2")
        flip["n"] += 1
        obs = session.execute(ToolCall("str_replace", json.dumps(
            {"path": "benchpkg/__init__.py", "old_str": old, "new_str": new})))
        if obs.error is not None:
            raise RuntimeError(f"str_replace failed in the benchmark: {obs.output}")

    def call(name: str, args: dict[str, Any]) -> Callable[[], Any]:
        def run() -> None:
            obs = session.execute(ToolCall(name, json.dumps(args)))
            if obs.error is not None or obs.exit_code != 0:
                raise RuntimeError(f"{name} failed in the benchmark: {obs.output[-300:]}")
        return run

    return {"bash": call("bash", {"command": "true"}),
            "view_file": call("view_file", {"path": "benchpkg/__init__.py"}), "str_replace": replace}


@contextlib.contextmanager
def _repo() -> Iterator[Path]:
    from taskforge.bench.docker_overhead import _REPO

    with tempfile.TemporaryDirectory(prefix="taskforge-bench-session-") as tmp:
        repo = Path(tmp) / "repo"
        for rel, text in _REPO.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(textwrap.dedent(text).lstrip())
        yield repo


def measure_backend(backend: str, calls: int, settings: Settings) -> dict[str, Any]:
    """Medians (seconds) per tool through a session on ``backend`` and directly, and the difference."""
    import dataclasses

    from taskforge.agent.session import open_session
    from taskforge.bench.curriculum import synthetic_task
    from taskforge.bench.docker_overhead import _SPEC

    task = dataclasses.replace(synthetic_task(0, 0.5, repo="benchpkg"), env_spec=_SPEC)
    with _repo() as repo:
        if backend == "docker":
            from sandboxes.docker import DockerSandbox

            env = DockerSandbox(settings).prepare(_SPEC, repo)
        else:
            from sandboxes.local import LocalSandbox

            env = LocalSandbox(settings).prepare(_SPEC, repo)

        @contextlib.contextmanager
        def provider(t: Any) -> Iterator[Path]:
            yield repo

        t0 = time.perf_counter()
        with open_session(task, backend=backend, settings=settings, workspace_provider=provider,
                          environment=env) as session:
            opened = time.perf_counter() - t0
            through = {k: statistics.median(_timed(fn, calls)) for k, fn in _through(session).items()}
            extra: dict[str, float] = {}
            if backend == "docker":
                container = session.backend.container  # type: ignore[attr-defined]
                extra["docker_exec_true_s"] = round(statistics.median(
                    _timed(lambda: container.exec_run(["true"], user="65534:65534"), calls)), 4)
            t1 = time.perf_counter()
        closed = time.perf_counter() - t1
        direct = {k: statistics.median(_timed(fn, calls)) for k, fn in _direct(repo).items()}
    return {"backend": backend, "calls": calls, "open_s": round(opened, 3), "close_s": round(closed, 3),
            "session_s": {k: round(v, 6) for k, v in through.items()},
            "direct_s": {k: round(v, 6) for k, v in direct.items()},
            "added_s": {k: round(through[k] - direct[k], 6) for k in TOOLS}, **extra}


def measure(backends: list[str], calls: int, settings: Settings) -> dict[str, Any]:
    return {"results": [measure_backend(b, calls, settings) for b in backends],
            "load_avg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("session")
    def session_cmd(
        calls: Annotated[int, typer.Option(help="Measured calls per tool (after one warm-up).")] = 30,
        backend: Annotated[list[str] | None, typer.Option(help="local and/or docker (repeatable).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ) -> None:
        """Median added latency per tool call of a live agent session (local jail, docker) over a direct run."""
        from rich.console import Console
        from rich.table import Table

        from taskforge.cli._common import settings_from, user_errors

        with user_errors():
            summary = measure(backend or ["local", "docker"], calls, settings_from())
        if as_json:
            print(json.dumps(summary))
            return
        table = Table(title=f"session cost per tool call: median of {calls} (load {summary['load_avg_1m']} on "
                            f"{summary['cpus']} CPUs)")
        for col in ("backend", "tool", "session ms", "direct ms", "added ms"):
            table.add_column(col, justify="right")
        for r in summary["results"]:
            for tool in TOOLS:
                table.add_row(r["backend"], tool, *(f"{r[k][tool] * 1000:.2f}" for k in ("session_s", "direct_s",
                                                                                          "added_s")))
        console = Console()
        console.print(table)
        for r in summary["results"]:
            console.print(f"{r['backend']}: open {r['open_s']}s, close {r['close_s']}s"
                          + (f", bare docker exec {r['docker_exec_true_s']}s" if "docker_exec_true_s" in r else ""))
