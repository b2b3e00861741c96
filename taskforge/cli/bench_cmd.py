"""``taskforge bench ...``: benchmarks, one sub-command per benchmark module.

Each benchmark module exposes ``register(bench_app)`` and is listed in ``_BENCH_MODULES`` (one line per
module); this file only builds the ``bench`` sub-app and mounts it on the main app.
"""

from __future__ import annotations

import importlib

import typer

# Each module defines ``register(bench_app)``. Add a line here when adding a benchmark.
_BENCH_MODULES = (
    "taskforge.bench.curriculum",
    "taskforge.bench.report_speed",
    "taskforge.bench.trainer_speed",
    "taskforge.bench.audit_cost",
    "taskforge.bench.docker_overhead",
    "taskforge.bench.generate",
)


def make_bench_app() -> typer.Typer:
    bench_app = typer.Typer(name="bench", help="Benchmarks: measure what taskforge claims.",
                            no_args_is_help=True)
    for name in _BENCH_MODULES:
        importlib.import_module(name).register(bench_app)
    return bench_app


def register(app: typer.Typer) -> None:
    app.add_typer(make_bench_app(), name="bench")
