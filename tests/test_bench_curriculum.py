"""The curriculum benchmark, in reduced form: the curriculum reaches the hard-tier target in fewer steps."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from taskforge.bench.curriculum import BenchConfig, run_benchmark, synthetic_pool
from taskforge.cli import bench_cmd

SMALL = BenchConfig(seeds=2, max_steps=60, pool_size=64, learning_rate=0.5)


def test_curriculum_beats_uniform_in_the_reduced_benchmark() -> None:
    s = run_benchmark(SMALL)
    assert s["reached_curriculum"] == 2
    assert s["steps_curriculum"] < s["steps_uniform"]
    assert s["speedup_vs_uniform"] > 1.2
    assert all(r > 1.0 for r in s["speedup_vs_uniform_per_seed"])
    assert s["speedup_vs_uniform"] == s["steps_uniform"] / s["steps_curriculum"]
    assert len(s["runs"]) == 8 and {r["arm"] for r in s["runs"]} == {"uniform", "dapo", "curriculum", "oracle"}
    assert s["steps_oracle"] <= s["steps_curriculum"] * 1.2  # the reference knows the true pass rates
    assert run_benchmark(SMALL)["runs"] == s["runs"]  # deterministic under its seeds


def test_benchmark_runs_on_a_dataset_directory(tmp_path: Path) -> None:
    from taskforge.dataset import write_tasks

    write_tasks(tmp_path / "ds", synthetic_pool(30, seed=4, shape="easy"))
    res = CliRunner().invoke(_app(), ["bench", "curriculum", "--dataset", str(tmp_path / "ds"), "--seeds", "1",
                                      "--steps", "20", "--learning-rate", "0.5", "--json"])
    assert res.exit_code == 0, res.output
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["pool"] == "dataset (30 tasks)"
    for key in ("steps_uniform", "steps_dapo", "steps_curriculum", "speedup_vs_uniform"):
        assert isinstance(last[key], float)


def test_bench_cli_json_last_line() -> None:
    res = CliRunner().invoke(_app(), ["bench", "curriculum", "--seeds", "1", "--steps", "40", "--pool-size", "48",
                                      "--learning-rate", "0.5", "--json"])
    assert res.exit_code == 0, res.output
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["seeds"] == 1 and last["steps_curriculum"] <= 40
    assert last["speedup_vs_uniform"] == last["steps_uniform"] / last["steps_curriculum"]


def _app() -> typer.Typer:
    app = typer.Typer()
    bench_cmd.register(app)
    return app
