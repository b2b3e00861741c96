"""A newcomer's CLI (issue 19 item 6): settings once and readable, run errors outside the table, whole
test ids in ``show``, and a missing locally-built base image that says how to build it."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from taskforge.cli import generate_cmd
from taskforge.cli._common import settings_line
from taskforge.core.settings import Settings


def _app() -> typer.Typer:
    a = typer.Typer(pretty_exceptions_enable=False)

    @a.callback()
    def _root() -> None:
        """Test app holding generate."""

    generate_cmd.register(a)
    return a


def test_settings_line_is_readable_and_names_only_what_differs(tmp_path) -> None:
    line = settings_line(Settings(work_dir=tmp_path, baseline_runs=1))
    assert line.startswith("settings: work_dir=") and "sandbox=local, jobs=1" in line
    assert "baseline_runs=1" in line and "docker_memory" not in line and "{" not in line


def test_run_error_is_one_line_outside_the_table_and_settings_logged_once(tmp_path) -> None:
    res = CliRunner().invoke(_app(), ["generate", str(tmp_path / "missing"), "--out", str(tmp_path / "out"),
                                      "--work-dir", str(tmp_path / "work")], env={"COLUMNS": "100"})
    assert res.exit_code == 1
    lines = res.output.splitlines()
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and "does not exist" in errors[0], res.output
    assert lines.index(errors[0]) > max(i for i, ln in enumerate(lines) if "│" in ln or "┃" in ln)
    assert not any("does not exist" in ln for ln in lines if "│" in ln), "the error was wrapped into the table"
    assert sum(ln.startswith("settings:") for ln in lines) == 1 and "{'" not in res.output


def test_missing_local_base_image_says_how_to_build_it(tmp_path, monkeypatch) -> None:
    import sandboxes.base_image as base_image

    monkeypatch.setattr(base_image, "base_image_missing", lambda tag, client=None: True)
    res = CliRunner().invoke(_app(), ["generate", str(tmp_path), "--out", str(tmp_path / "out"), "--sandbox",
                                      "docker", "--work-dir", str(tmp_path / "work")])
    assert res.exit_code == 1
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "is not built yet" in errors[0] and "--build-base" in errors[0], res.output
    assert "Traceback" not in res.output
