"""Shared CLI plumbing: one-line user errors, the console, settings resolution."""

from __future__ import annotations

import contextlib
import functools
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
    """Resolve settings (file -> env -> flags) and log them once per process, readably."""
    s = Settings.load(overrides)
    _log_once(settings_line(s))
    return s


ALWAYS_SHOWN = ("sandbox", "jobs", "work_dir")


def settings_line(s: Settings) -> str:
    """``settings: sandbox=local, jobs=1, work_dir=..., baseline_runs=1 (others at their defaults)``."""
    values, defaults = s.to_dict(), Settings().to_dict()
    shown = {k: v for k, v in values.items() if k in ALWAYS_SHOWN or v != defaults.get(k)}
    return "settings: " + ", ".join(f"{k}={v}" for k, v in shown.items()) + " (others at their defaults)"


@functools.cache
def _log_once(line: str) -> None:
    err_console.print(f"[dim]{escape(line)}[/]", highlight=False, soft_wrap=True)
