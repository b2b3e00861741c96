"""``taskforge mine`` end to end on a toy repository with the real local sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from taskforge.cli import mine_cmd
from tests.fixtures_repos import make_toy_project
from tests.test_local_sandbox import shared_work_dir


def mine_app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """Test app holding only the mine command."""

    mine_cmd.register(app)
    return app


@pytest.fixture(scope="module")
def toy_source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli")
    src = make_toy_project(base / "toyproj", flaky=True)
    return src, shared_work_dir(tmp_path_factory)


def test_json_summary_and_bad_source_does_not_stop_the_others(toy_source, tmp_path: Path) -> None:
    src, work = toy_source
    result = CliRunner().invoke(mine_app(), [
        "mine", str(tmp_path / "missing"), str(src), "--out", str(tmp_path / "out"), "--json",
        "--work-dir", str(work), "--runs", "2",
    ])
    assert result.exit_code == 1  # one source failed
    lines = [json.loads(ln) for ln in result.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1
    row = lines[0]
    assert {k: row[k] for k in ("tests_passed", "tests_failed", "tests_flaky", "tests_skipped")} == {
        "tests_passed": 2, "tests_failed": 2, "tests_flaky": 1, "tests_skipped": 2}  # xfailed is not reliable
    assert row["entities"] >= 4 and row["covered_entities"] >= 2
    assert 0 < row["coverage_percent"] < 100  # unused() is never run
    assert row["seconds"] > 0
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "missing" in errors[0] and "does not exist" in errors[0]
    assert "Traceback" not in result.output
    prof = Path(row["profile_dir"])
    assert prof.parent == tmp_path / "out" and (prof / "profile.json").is_file()


def test_table_output_and_exit_zero(toy_source, tmp_path: Path) -> None:
    src, work = toy_source
    result = CliRunner().invoke(mine_app(), ["mine", str(src), "--out", str(tmp_path / "o"),
                                             "--work-dir", str(work), "--runs", "1"])
    assert result.exit_code == 0, result.output
    assert "taskforge mine" in result.stdout and "passed" in result.stdout
    assert f"profile of {src}" in result.stdout.replace("\n", "")


def test_only_bad_sources_exit_nonzero_with_one_line_each(tmp_path: Path) -> None:
    result = CliRunner().invoke(mine_app(), ["mine", "pypi:nope", str(tmp_path / "gone"), "--out",
                                             str(tmp_path / "o"), "--work-dir", str(tmp_path / "w")])
    assert result.exit_code == 1
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 2
    assert "expected pypi:NAME==VERSION" in errors[0] and "does not exist" in errors[1]
