"""Difficulty from outcomes: the Rasch fit, the calibration column of a dataset, ``taskforge calibrate``, train."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from taskforge.bench.curriculum import synthetic_pool, synthetic_task
from taskforge.cli import calibrate_cmd
from taskforge.core.errors import ConfigError
from taskforge.dataset import (
    Calibration,
    Dataset,
    DatasetWriter,
    read_calibration,
    write_calibration,
    write_tasks,
)
from taskforge.rl.calibrate import Cell, OutcomeRecorder, fit_rasch, rank_agreement, spearman
from taskforge.rl.curriculum import CurriculumSampler, effective_difficulties
from taskforge.rl.grading import FakeGrader
from taskforge.rl.loop import train
from taskforge.rl.policies import PolicyOptions, SimulatedPolicy


def _simulated_cells(b: np.ndarray, theta: np.ndarray, trials: int, seed: int = 0) -> list[Cell]:
    rng = np.random.default_rng(seed)
    cells = []
    for r, th in enumerate(theta):
        p = 1 / (1 + np.exp(-(th - b)))
        s = rng.binomial(trials, p)
        cells += [Cell(f"t{j}", f"r{r}", int(s[j]), trials) for j in range(len(b))]
    return cells


def test_the_fit_recovers_known_difficulties_up_to_a_shift() -> None:
    b = np.linspace(-3, 3, 30)
    theta = np.array([-1.0, 0.5, 2.0])
    fit = fit_rasch(_simulated_cells(b, theta, trials=40))
    assert fit.converged and fit.iterations < 200
    got = np.array([fit.difficulty[f"t{j}"] for j in range(30)])
    assert spearman(b, got) > 0.97
    # Location is fixed by the penalties, scale by the data: differences come back.
    shift = float(np.mean(got - b))
    assert np.abs(got - b - shift).mean() < 0.35 and np.abs(got - b - shift).max() < 1.5
    assert fit.ability["r2"] - fit.ability["r0"] == pytest.approx(3.0, abs=0.4)
    assert set(fit.observations.values()) == {120}


def test_always_passed_and_never_passed_tasks_stay_finite_and_ordered() -> None:
    cells = [Cell("easy", "a", 10, 10), Cell("mid", "a", 5, 10), Cell("hard", "a", 0, 10)]
    fit = fit_rasch(cells)
    d = fit.difficulty
    assert all(math.isfinite(v) for v in d.values())
    assert d["easy"] < d["mid"] < d["hard"]
    with pytest.raises(ConfigError, match="no graded rollouts"):
        fit_rasch([Cell("x", "a", 0, 0)])
    with pytest.raises(ConfigError, match="penalties"):
        fit_rasch(cells, l2_difficulty=0)


def test_spearman_handles_ties_and_short_input() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2, 3], [5, 5, 6, 7]) == pytest.approx(1.0)
    assert math.isnan(spearman([1, 2], [2, 1]))
    assert math.isnan(spearman([1, 2, 3], [1, 1, 1]))


def test_recorder_round_trips_through_json() -> None:
    rec = OutcomeRecorder()
    rec.add("a", "s0", (1.0, 0.0, 1.0))
    rec.add("a", "s0", (0.0,))
    rec.add("b", "s1", (1.0,))
    back = OutcomeRecorder()
    back.load_list(json.loads(json.dumps(rec.to_list())))
    assert back.cells() == rec.cells() == [Cell("a", "s0", 2, 4), Cell("b", "s1", 1, 1)]
    assert len(back) == 5


# -- the dataset column -------------------------------------------------------------------------------
def test_calibration_column_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    tasks = synthetic_pool(6, seed=0)
    write_tasks(root, tasks)
    before = Dataset.open(root)
    assert before.calibration() == {}
    assert "calibrated_difficulty" not in before.table().column_names  # an old dataset reads as before
    nulls = before.table(columns=["instance_id", "calibrated_difficulty", "calibration_observations"])
    assert nulls.column("calibrated_difficulty").null_count == 6

    ids = [t.instance_id for t in tasks]
    write_calibration(root, {ids[0]: Calibration(1.25, 16), ids[1]: Calibration(-0.5, 8)}, source="test")
    ds = Dataset.open(root)  # shards and manifest untouched: still verifies
    assert {k: (v.difficulty, v.observations) for k, v in ds.calibration().items()} == {
        ids[0]: (1.25, 16), ids[1]: (-0.5, 8)}
    rows = {r["instance_id"]: r for r in ds.table().to_pylist()}
    assert rows[ids[0]]["calibrated_difficulty"] == 1.25 and rows[ids[0]]["calibration_observations"] == 16
    assert rows[ids[2]]["calibrated_difficulty"] is None
    assert ds.tasks() == sorted(tasks, key=lambda t: t.instance_id)  # task rows (and content hashes) unchanged

    # A later calibration replaces its tasks' entries and keeps the others; foreign ids are ignored on read.
    write_calibration(root, {ids[1]: Calibration(2.0, 32), "not-in-dataset": Calibration(9.0, 1)}, source="again")
    cal = Dataset.open(root).calibration()
    assert cal[ids[0]].difficulty == 1.25 and cal[ids[1]].difficulty == 2.0 and cal[ids[1]].source == "again"
    assert "not-in-dataset" not in cal and "not-in-dataset" in read_calibration(root)
    # Appending tasks keeps the calibration.
    with DatasetWriter(root) as w:
        w.add(synthetic_task(99, 0.5))
    assert Dataset.open(root).calibration()[ids[0]].observations == 16
    assert len(Dataset.open(root)) == 7


def test_a_damaged_calibration_file_is_a_dataset_error(tmp_path: Path) -> None:
    from taskforge.core.errors import DatasetError

    write_tasks(tmp_path / "ds", synthetic_pool(3))
    (tmp_path / "ds" / "calibration.parquet").write_bytes(b"not parquet")
    with pytest.raises(DatasetError, match="calibrate again"):
        Dataset.open(tmp_path / "ds").calibration()


# -- the sampler prefers calibrated values ------------------------------------------------------------
def test_calibrated_difficulty_wins_over_the_static_score() -> None:
    tasks = synthetic_pool(10, seed=3)
    order = sorted(tasks, key=lambda t: t.difficulty.score)
    # Calibration says the statically easiest task is the hardest, and keeps the others' order.
    cal = {t.instance_id: 10 * t.difficulty.score - 2 for t in order[1:]}
    cal[order[0].instance_id] = 20.0
    eff = dict(zip([t.instance_id for t in tasks], effective_difficulties(tasks, cal), strict=True))
    assert max(eff, key=eff.get) == order[0].instance_id
    # On the score scale: an exactly linear calibration maps back onto the scores.
    assert all(eff[t.instance_id] == pytest.approx(t.difficulty.score) for t in order[1:])
    sampler = CurriculumSampler.from_tasks(tasks, calibration=cal)
    assert sampler.difficulties.tolist() == effective_difficulties(tasks, cal)
    # Without calibration: the scores; with one calibrated task, it is centred on its own score.
    assert effective_difficulties(tasks, None) == [t.difficulty.score for t in tasks]
    one = effective_difficulties(tasks, {tasks[0].instance_id: 5.0})
    assert one[0] == pytest.approx(tasks[0].difficulty.score) and one[1:] == [t.difficulty.score for t in tasks[1:]]


def test_training_run_fits_and_writes_back_and_the_next_run_uses_it(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    tasks = synthetic_pool(24, seed=2)
    write_tasks(root, tasks)
    policy = SimulatedPolicy(PolicyOptions(seed=0, skill=4.0, learning_rate=0.0))
    res = train(root, policy, FakeGrader(), steps=12, group_size=8, batch_size=6, calibrate=True, calibration_bucket=4,
                state_path=tmp_path / "state.json")
    assert res.calibrated > 10
    cal = Dataset.open(root).calibration()
    assert len(cal) == res.calibrated and all(c.source == "train:simulated" for c in cal.values())
    assert sum(c.observations for c in cal.values()) == res.rollouts
    latent = {t.instance_id: policy.latent_difficulty(t) for t in tasks}
    ids = sorted(cal)
    assert spearman([latent[i] for i in ids], [cal[i].difficulty for i in ids]) > 0.6
    state = json.loads((tmp_path / "state.json").read_text())
    assert sum(n for *_, n in state["sampler"]["recorded_outcomes"]) == res.rollouts
    # The next run's default sampler starts from the calibrated difficulties.
    train(root, SimulatedPolicy(PolicyOptions(seed=0)), FakeGrader(), steps=1, group_size=2, batch_size=2,
          state_path=tmp_path / "next.json")
    from taskforge.rl.loop import dataset_calibration

    in_order = Dataset.open(root).tasks()
    used = json.loads((tmp_path / "next.json").read_text())["sampler"]["difficulties"]
    assert used == effective_difficulties(in_order, dataset_calibration(root))
    assert used != [t.difficulty.score for t in in_order]


# -- the command ---------------------------------------------------------------------------------------
def _app() -> typer.Typer:
    app = typer.Typer()
    calibrate_cmd.register(app)
    app.command("noop")(lambda: None)
    return app


def test_calibrate_command_writes_the_column_and_reports_rank_agreement(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_tasks(root, synthetic_pool(30, seed=5))
    res = CliRunner().invoke(_app(), ["calibrate", str(root), "--policy", "simulated:skill=3",
                                      "--policy", "simulated:skill=6", "--policy", "null", "--grader", "fake",
                                      "--rollouts", "16", "--json"])
    assert res.exit_code == 0, res.output
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["written"] == 30 and last["converged"]
    assert last["rank_agreement"]["delete"]["tasks"] == 30 and last["rank_agreement"]["delete"]["spearman"] > 0.8
    assert last["ability"]["simulated:skill=6"] > last["ability"]["simulated:skill=3"] > last["ability"]["null"]
    cal = Dataset.open(root).calibration()
    assert len(cal) == 30 and {c.observations for c in cal.values()} == {48}
    assert rank_agreement(Dataset.open(root).tasks(), {k: c.difficulty for k, c in cal.items()})["all"]["tasks"] == 30


def test_calibrate_command_user_errors(tmp_path: Path) -> None:
    write_tasks(tmp_path / "ds", synthetic_pool(3))
    bad = CliRunner().invoke(_app(), ["calibrate", str(tmp_path / "ds"), "--policy", "simulated:skil=3",
                                      "--grader", "fake"])
    assert bad.exit_code == 1 and "KEY one of" in bad.output
    typed = CliRunner().invoke(_app(), ["calibrate", str(tmp_path / "ds"), "--policy", "simulated:skill=x",
                                        "--grader", "fake"])
    assert typed.exit_code == 1 and "expects a float" in typed.output
    dry = CliRunner().invoke(_app(), ["calibrate", str(tmp_path / "ds"), "--policy", "oracle", "--grader", "fake",
                                      "--no-write"])
    assert dry.exit_code == 0 and Dataset.open(tmp_path / "ds").calibration() == {}


def test_train_command_calibrates_and_its_sampler_prefers_the_calibration(tmp_path: Path) -> None:
    from taskforge.cli import train_cmd

    app = typer.Typer()
    train_cmd.register(app)
    app.command("noop")(lambda: None)
    root = tmp_path / "ds"
    write_tasks(root, synthetic_pool(16, seed=1))
    res = CliRunner().invoke(app, ["train", str(root), "--policy", "simulated", "--grader", "fake", "--steps", "6",
                                   "--calibrate", "--json"])
    assert res.exit_code == 0, res.output
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["calibrated"] == len(Dataset.open(root).calibration()) > 0
    res = CliRunner().invoke(app, ["train", str(root), "--policy", "simulated", "--grader", "fake", "--steps", "1",
                                   "--state", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    used = json.loads((tmp_path / "s.json").read_text())["sampler"]["difficulties"]
    assert used != [t.difficulty.score for t in Dataset.open(root).tasks()]
