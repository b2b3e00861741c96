"""``taskforge bench ...``: benchmarks, one sub-command per benchmark module.

Each benchmark module exposes ``register(bench_app)`` and is listed in ``_BENCH_MODULES`` (command
name -> module, one line each). Modules are imported only when their command runs (or ``bench
--help`` lists them): a benchmark may import numpy, libcst or the dataset stack, and ``taskforge
report`` should not pay for that at start-up.
"""

from __future__ import annotations

import importlib

import click
import typer
from typer.core import TyperGroup

# Each module defines ``register(bench_app)``. Add a line here when adding a benchmark.
_BENCH_MODULES = {
    "curriculum": "taskforge.bench.curriculum",
    "report-speed": "taskforge.bench.report_speed",
    "trainer-speed": "taskforge.bench.trainer_speed",
    "audit-cost": "taskforge.bench.audit_cost",
    "docker-overhead": "taskforge.bench.docker_overhead",
    "generate": "taskforge.bench.generate",
    "reward-latency": "taskforge.bench.reward_latency",
    "session": "taskforge.bench.session",
    "feedback": "taskforge.bench.feedback",
    "corpus": "taskforge.bench.corpus",
    "validation-cost": "taskforge.bench.validation_cost",
}


def load_bench_command(name: str) -> click.Command | None:
    """The click command ``name``, built by importing its module now; None for an unknown name."""
    module = _BENCH_MODULES.get(name)
    if module is None:
        return None
    single = typer.Typer()
    importlib.import_module(module).register(single)
    group = typer.main.get_group(single)
    command = group.get_command(click.Context(group), name)
    if command is None:
        raise RuntimeError(f"{module}.register() did not add a command named {name!r}")
    return command


class LazyBenchGroup(TyperGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_BENCH_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_bench_command(cmd_name)


def make_bench_app() -> typer.Typer:
    return typer.Typer(name="bench", cls=LazyBenchGroup, help="Benchmarks: measure what taskforge claims.",
                       no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(make_bench_app(), name="bench")
