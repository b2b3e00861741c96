"""Mining real PyPI packages: counts agree with a plain pytest run of the same sdist in a fresh venv.

Needs a package index (marker ``realrepo``) and minutes (``slow``). The work area is the configured
one (``TASKFORGE_WORK_DIR``, default ``~/.cache/taskforge``) so sdists and environments are reused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taskforge.bench.mine_vs_plain import compare
from taskforge.core.settings import Settings
from tests.test_mine_cli import mine_app

pytestmark = [pytest.mark.realrepo, pytest.mark.slow]


def test_mine_inflection_cli_json(tmp_path: Path) -> None:
    work = Settings.load().work_dir
    result = CliRunner().invoke(mine_app(), ["mine", "pypi:inflection==0.5.1", "--out", str(tmp_path),
                                             "--json", "--work-dir", str(work)])
    assert result.exit_code == 0, result.output
    row = json.loads(next(ln for ln in result.stdout.splitlines() if ln.startswith("{")))
    assert (row["tests_passed"], row["tests_failed"], row["tests_flaky"]) == (455, 0, 0)
    assert row["entities"] >= 10 and row["covered_entities"] >= 10
    assert row["coverage_percent"] > 50


@pytest.mark.parametrize("source", ["pypi:inflection==0.5.1", "pypi:itsdangerous==2.2.0"])
def test_mine_agrees_with_plain_pytest_in_fresh_venv(source: str, tmp_path: Path) -> None:
    row = compare(source, tmp_path / "profiles", Settings.load())
    assert row["mine_passed"] > 100
    assert row["passed_agree"], (row["only_mine_passed"], row["only_plain_passed"])
    assert row["failed_agree"]
    assert row["mine_passed"] == row["plain_passed"] and row["mine_failed"] == row["plain_failed"]
