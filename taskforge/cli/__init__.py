"""The ``taskforge`` command line: a thin Typer app; each command group lives in its own module.

User errors (``TaskforgeError``) print one line and exit 1; no traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console
from rich.markup import escape

from taskforge.core.errors import TaskforgeError

app = typer.Typer(
    name="taskforge",
    help="Turn real repositories into verifiable coding tasks for RL, and train on them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
err_console = Console(stderr=True)

# Each module defines ``register(app)``. Add a line here when adding a command module.
_COMMAND_MODULES = (
    "taskforge.cli.mine_cmd",
    "taskforge.cli.reward_cmd",
    "taskforge.cli.generate_cmd",
    "taskforge.cli.validate_cmd",
    "taskforge.cli.train_cmd",
    "taskforge.cli.bench_cmd",
    "taskforge.cli.sandbox_cmd",
    "taskforge.cli.audit_cmd",
    "taskforge.cli.dataset_cmd",
    "taskforge.cli.report_cmd",
    "taskforge.cli.calibrate_cmd",
)


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(app)


_register_all()


def main() -> None:
    try:
        app()
    except TaskforgeError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        err_console.print("[bold red]interrupted[/]")
        sys.exit(130)
