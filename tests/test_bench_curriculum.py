"""The curriculum benchmark, in reduced form: the curriculum reaches the hard-tier target in fewer steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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


def test_the_mostly_too_hard_pool_shape_is_benchmarked() -> None:
    pool = synthetic_pool(200, seed=0, shape="hard")
    assert sum(t.difficulty.score > 0.5 for t in pool) > 150  # most tasks start out of reach
    s = run_benchmark(BenchConfig(seeds=1, max_steps=60, pool_size=64, learning_rate=0.5, pool_shape="hard"))
    assert s["pool"] == "synthetic/hard" and s["reached_curriculum"] == 1
    assert s["steps_curriculum"] < s["steps_uniform"]
    assert s["oracle_fraction"] == pytest.approx(s["steps_oracle"] / s["steps_curriculum"])
    assert 0.5 < s["oracle_fraction_per_seed"][0] <= 1.2


def test_exhaustion_on_demand_generation_reaches_what_the_fixed_pool_cannot() -> None:
    from taskforge.bench.curriculum import ExhaustionConfig, run_exhaustion

    s = run_exhaustion(ExhaustionConfig(seeds=1, max_steps=120, learning_rate=0.2, pool_size=64))
    fixed, grown = [r for r in s["runs"] if r["arm"] == "fixed"][0], [r for r in s["runs"] if r["arm"] == "on_demand"][0]
    assert not fixed["reached"] and fixed["pool_max_score"] <= 0.4 and fixed["added_tasks"] == 0
    assert grown["reached"] and grown["steps"] < 120 and grown["final_beyond_pass_rate"] >= 0.5
    assert grown["added_tasks"] >= 16 and grown["pool_max_score"] > 0.75  # harder than anything it started with
    assert fixed["final_beyond_pass_rate"] < 0.4


def test_bench_cli_exhaustion_scenario() -> None:
    res = CliRunner().invoke(_app(), ["bench", "curriculum", "--scenario", "exhaustion", "--seeds", "1",
                                      "--steps", "30", "--json"])
    assert res.exit_code == 0, res.output
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["scenario"] == "exhaustion" and last["steps_fixed"] == 30.0 and last["reached_fixed"] == 0
    bad = CliRunner().invoke(_app(), ["bench", "curriculum", "--scenario", "nope"])
    assert bad.exit_code == 1 and "unknown scenario" in bad.output
