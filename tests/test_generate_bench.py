"""``taskforge bench generate`` in its reduced form: a self-built project, two candidates, both modes."""

from __future__ import annotations

import json

import pytest
from generate_fixtures import make_mini_project
from typer.testing import CliRunner

from taskforge.cli import bench_cmd


@pytest.mark.slow
def test_bench_generate_reports_both_modes_and_they_agree(tmp_path):
    import typer

    app = typer.Typer(pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """Test app holding the bench sub-app."""

    bench_cmd.register(app)
    src = make_mini_project(tmp_path / "minipkg")
    res = CliRunner().invoke(app, ["bench", "generate", str(src), "--max-candidates", "2", "--strategies", "stub",
                                   "--work-dir", str(tmp_path / "work"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    for key in ("tasks_per_cpu_min_naive", "tasks_per_cpu_min", "speedup_vs_naive", "suite_runs_per_task"):
        assert isinstance(out[key], (int, float)), key
    assert out["tasks"] == 2 and out["agree"] is True
    assert out["speedup_vs_naive"] > 1.0  # warm runs, selected tests, no environment copies
    assert "validated tasks per CPU-minute" in res.output
