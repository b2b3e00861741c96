"""Shared CLI plumbing: one-line user errors, the console, settings resolution."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from taskforge.core.errors import TaskforgeError
from taskforge.core.settings import Settings

console = Console()
err_console = Console(stderr=True)

ADVANCED = "Advanced"


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn a ``TaskforgeError`` into one red line on stderr and exit code 1 (no traceback)."""
    try:
        yield
    except TaskforgeError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def settings_from(**overrides: Any) -> Settings:
    """Resolve settings (file -> env -> flags) and log them once."""
    s = Settings.load(overrides)
    err_console.print(f"[dim]settings: {s.to_dict()}[/]", highlight=False, soft_wrap=True)
    return s
