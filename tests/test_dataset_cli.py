"""`taskforge show|stats|export`: exit codes and messages, through Typer's CliRunner."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taskforge.cli import app
from taskforge.core.outcomes import Rejected, RejectReason
from taskforge.dataset import DatasetWriter, RunFunnel
from tests.strategies import mini_task, sample_task

runner = CliRunner()


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    task, src = mini_task(tmp_path)
    with DatasetWriter(root) as w:
        w.add_repo_archive(task.repo, task.base_commit, src)
        w.add(task)
        w.add_all(sample_task(i, score=0.95) for i in range(3))
        w.record_run(RunFunnel.from_outcomes("r", "pypi:demo==1.0", "demo", 3,
                                             [Rejected("c", RejectReason.UNSTABLE)] * 2))
    return root


def test_missing_dir_is_one_line_and_exit_1(tmp_path: Path) -> None:
    for args in (["show", str(tmp_path / "nope")], ["stats", str(tmp_path / "nope")],
                 ["export", str(tmp_path / "nope"), "--format", "verl", "--out", str(tmp_path / "o")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, args
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and "does not exist" in lines[0] and "Traceback" not in result.output


def test_show_table_and_one_task(dataset: Path) -> None:
    result = runner.invoke(app, ["show", str(dataset), "--repo", "demo"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())  # rich may wrap a long dataset path
    assert "3 of 4 tasks" in flat and "demo__delete__" in flat  # (ids may be cut to the console width)
    assert "mini__delete" not in result.output
    one = runner.invoke(app, ["show", str(dataset), "mini__delete__mini.calc.mul-1a2b3c4d"], env={"COLUMNS": "200"})
    assert one.exit_code == 0, one.output
    assert "tests/test_mul.py::test_mul_zero" in one.output and "repeated addition" in one.output
    assert "def mul(a, b):" in one.output  # the gold patch is shown to the human
    missing = runner.invoke(app, ["show", str(dataset), "mini__nope"])
    assert missing.exit_code == 1 and "no task 'mini__nope'" in missing.output


def test_show_in_a_narrow_terminal_folds_ids_and_keeps_the_short_columns(dataset: Path) -> None:
    result = runner.invoke(app, ["show", str(dataset), "--repo", "mini"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "strategy" in result.output and "audit" in result.output  # headers not squeezed to "st"
    cells = "".join(line.split("│")[1].strip() for line in result.output.splitlines() if line.count("│") > 2)
    assert "mini__delete__mini.calc.mul-1a2b3c4d" in cells  # the id, folded, is whole: no "…"
    assert "…" not in result.output


def test_stats_json_counts_and_funnel(dataset: Path) -> None:
    result = runner.invoke(app, ["stats", str(dataset), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["tasks"] == 4 and data["by_repo"] == {"demo": 3, "mini": 1}
    assert data["funnel"] == {"candidates": 5, "accepted": 3, "rejected": {"unstable": 2}}
    assert data["difficulty_histogram"][-1].split()[2] == "3"
    table = runner.invoke(app, ["stats", str(dataset)])
    assert table.exit_code == 0 and "rejection funnel" in table.output and "unstable" in table.output


def test_export_each_format(dataset: Path, tmp_path: Path) -> None:
    harbor = runner.invoke(app, ["export", str(dataset), "--format", "harbor", "--out", str(tmp_path / "h"),
                                 "--repo", "mini", "--base-image", "python:3.11-slim", "--no-pip"])
    assert harbor.exit_code == 0, harbor.output
    (task_dir,) = (tmp_path / "h").iterdir()
    assert tomllib.loads((task_dir / "task.toml").read_text())["metadata"]["repo"] == "mini"
    assert "pip install" not in (task_dir / "environment" / "Dockerfile").read_text()
    swe = runner.invoke(app, ["export", str(dataset), "-f", "swebench", "-o", str(tmp_path / "s")])
    assert swe.exit_code == 0 and len((tmp_path / "s" / "tasks.jsonl").read_text().splitlines()) == 4
    verl = runner.invoke(app, ["export", str(dataset), "-f", "verl", "-o", str(tmp_path / "v"), "--min-score", "0.9"])
    assert verl.exit_code == 0 and "3 tasks as verl parquet" in verl.output
    # harbor export of tasks without an archive: one line, exit 1
    bad = runner.invoke(app, ["export", str(dataset), "-f", "harbor", "-o", str(tmp_path / "h2"), "--repo", "demo"])
    assert bad.exit_code == 1 and "has no archive of demo@" in bad.output


def test_unknown_format_is_a_usage_error(dataset: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["export", str(dataset), "--format", "csv", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "csv" in result.output


def test_export_harbor_network_mode(dataset: Path, tmp_path: Path) -> None:
    bad = runner.invoke(app, ["export", str(dataset), "--format", "harbor", "--out", str(tmp_path / "b"),
                              "--network", "wifi"])
    assert bad.exit_code == 1 and "--network must be 'policy' or 'compose'" in bad.output
    assert "Traceback" not in bad.output
    ok = runner.invoke(app, ["export", str(dataset), "--format", "harbor", "--out", str(tmp_path / "h"),
                             "--network", "compose", "--repo", "mini"])
    assert ok.exit_code == 0, ok.output
    tomls = list((tmp_path / "h").glob("*/task.toml"))
    assert tomls and all(tomllib.loads(t.read_text())["metadata"]["network"] == "compose" for t in tomls)
