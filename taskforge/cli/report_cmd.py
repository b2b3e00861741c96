"""``taskforge report DIR [--train-log LOG] --out report.html``: one self-contained HTML report."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from taskforge.cli._common import err_console, user_errors
from taskforge.core.errors import ConfigError


def report(
    dataset: Annotated[Path, typer.Argument(help="Dataset folder written by `taskforge generate`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write (opens offline).")] = Path("report.html"),
    train_log: Annotated[Path | None, typer.Option(
        help="JSONL metrics of `taskforge train` (default: DIR/train/metrics.jsonl when it exists).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary object as the last line.")] = False,
) -> None:
    """Plots of the rejection funnel, difficulty, test sizes, timings, leak audit and training, plus a task browser."""
    with user_errors():
        try:
            import vl_convert  # noqa: F401  (draws nothing here; the page inlines its Vega bundle)

            from taskforge.report.html import write_report
        except ImportError as exc:
            # (no "taskforge[report]" here: the error line is printed as rich markup, which eats "[report]")
            raise ConfigError(f"the report needs vl-convert-python ({exc}); install the report extra "
                              "(pip install vl-convert-python)") from None
        log = train_log
        default_log = dataset / "train" / "metrics.jsonl"
        if log is None and default_log.is_file():
            log = default_log
        start = time.perf_counter()
        path = write_report(dataset, out, log)
        seconds = time.perf_counter() - start
    err_console.print(f"report: {path} ({path.stat().st_size / 1024:.0f} KiB, {seconds:.2f} s)"
                      + (f"; training log {log}" if log else ""), highlight=False)
    if as_json:
        print(json.dumps({"out": str(path), "bytes": path.stat().st_size, "seconds": round(seconds, 3),
                          "train_log": str(log) if log else None}))


def register(app: typer.Typer) -> None:
    app.command("report")(report)
