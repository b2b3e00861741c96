"""The RL loop: metrics log, oracle/null pass rates, resume equals an uninterrupted run, DAPO filtering, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from taskforge.bench.curriculum import synthetic_pool
from taskforge.cli import train_cmd
from taskforge.core.errors import ConfigError
from taskforge.rl.curriculum import CurriculumSampler, UniformSampler
from taskforge.rl.grading import FakeGrader
from taskforge.rl.loop import train
from taskforge.rl.policies import NullPolicy, OraclePolicy, PolicyOptions, SimulatedPolicy

POOL = synthetic_pool(40, seed=0)
VOLATILE = {"grading_seconds", "step_seconds"}


def _stable(line: dict) -> dict:
    return {k: v for k, v in line.items() if k not in VOLATILE}


def test_oracle_passes_everything_and_null_nothing(tmp_path: Path) -> None:
    r = train(POOL, OraclePolicy(), FakeGrader(), steps=3, group_size=2, batch_size=4,
              log_path=tmp_path / "o.jsonl")
    assert [m.pass_rate for m in r.history] == [1.0, 1.0, 1.0]
    assert all(m.zero_variance_fraction == 1.0 for m in r.history)
    r = train(POOL, NullPolicy(), FakeGrader(), steps=2, group_size=2, batch_size=4)
    assert [m.pass_rate for m in r.history] == [0.0, 0.0]
    assert r.to_dict()["steps"] == 2 and r.to_dict()["loss"] is None


def test_log_has_one_line_per_step_with_the_metrics(tmp_path: Path) -> None:
    log = tmp_path / "m.jsonl"
    train(POOL, SimulatedPolicy(PolicyOptions(skill=3.0)), FakeGrader(), steps=4, group_size=4, batch_size=5,
          log_path=log)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3, 4]
    for x in lines:
        for key in ("pass_rate", "difficulty_mean", "difficulty_std", "target", "zero_variance_fraction",
                    "grading_seconds", "rollouts", "loss"):
            assert key in x
        assert x["rollouts"] == 20 and 0.0 <= x["pass_rate"] <= 1.0 and x["difficulty_std"] > 0


def test_simulated_learner_improves_under_the_curriculum() -> None:
    pol = SimulatedPolicy(PolicyOptions(seed=0, learning_rate=0.3))
    r = train(POOL, pol, FakeGrader(), steps=60, group_size=8, batch_size=8, seed=0)
    assert pol.skill > 3.0
    targets = [m.target for m in r.history]
    assert targets[-1] > targets[0] + 0.2  # the curriculum moved to harder tasks
    assert r.history[-1].difficulty_mean > r.history[0].difficulty_mean


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path: Path) -> None:
    def run(steps: int, d: Path, resume: bool) -> None:
        train(POOL, SimulatedPolicy(PolicyOptions(seed=3)), FakeGrader(), steps=steps, group_size=4, batch_size=4,
              sampler=CurriculumSampler.from_tasks(POOL, seed=3, batch_size=4), log_path=d / "m.jsonl",
              state_path=d / "state.json", resume=resume)

    run(8, tmp_path / "a", resume=False)
    run(3, tmp_path / "b", resume=False)
    # A crash after logging step 4 but before saving its state: the resumed run redoes step 4.
    with (tmp_path / "b" / "m.jsonl").open("a") as fh:
        fh.write(json.dumps({"step": 4, "pass_rate": -1}) + "\n")
    run(8, tmp_path / "b", resume=True)
    a = [_stable(json.loads(x)) for x in (tmp_path / "a" / "m.jsonl").read_text().splitlines()]
    b = [_stable(json.loads(x)) for x in (tmp_path / "b" / "m.jsonl").read_text().splitlines()]
    assert [x["step"] for x in b] == list(range(1, 9))
    assert a == b
    assert json.loads((tmp_path / "b" / "state.json").read_text())["step"] == 8


def test_resume_with_another_policy_is_refused(tmp_path: Path) -> None:
    train(POOL, OraclePolicy(), FakeGrader(), steps=1, group_size=1, batch_size=2, state_path=tmp_path / "s.json")
    with pytest.raises(ConfigError, match="saved by policy 'oracle'"):
        train(POOL, NullPolicy(), FakeGrader(), steps=2, group_size=1, batch_size=2,
              state_path=tmp_path / "s.json", resume=True)


def test_zero_variance_filtering_keeps_only_informative_groups() -> None:
    seen = []

    class Spy(SimulatedPolicy):
        def update(self, groups):
            seen.append([g.zero_variance for g in groups])
            return super().update(groups)

    r = train(POOL, Spy(PolicyOptions(skill=2.0)), FakeGrader(), steps=5, group_size=4, batch_size=4,
              sampler=UniformSampler.from_tasks(POOL, seed=0), filter_zero_variance=True, max_gen_batches=6)
    assert seen and not any(any(zv) for zv in seen)
    assert any(m.gen_batches > 1 for m in r.history)
    assert all(m.rollouts == m.gen_batches * 16 for m in r.history)
    assert all(m.kept_groups <= 4 for m in r.history)


def test_a_policy_returning_the_wrong_number_of_patches_is_an_error() -> None:
    class Short(OraclePolicy):
        def propose(self, task, n):
            return [task.patch]

    with pytest.raises(ConfigError, match="returned 1 patches"):
        train(POOL, Short(), FakeGrader(), steps=1, group_size=3, batch_size=1)


# --- CLI ----------------------------------------------------------------------------------------------
@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    from taskforge.dataset import write_tasks

    root = tmp_path / "ds"
    write_tasks(root, synthetic_pool(12, seed=1))
    return root


def _app() -> typer.Typer:
    app = typer.Typer()
    train_cmd.register(app)
    app.command("noop", hidden=True)(lambda: None)  # keep `train` a named sub-command
    return app


def test_cli_train_json_last_line(dataset_dir: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(_app(), ["train", str(dataset_dir), "--policy", "simulated", "--grader", "fake",
                                 "--steps", "3", "--group-size", "4", "--batch-size", "3", "--json"])
    assert res.exit_code == 0, res.output
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["steps"] == 3 and "loss" in last and 0.0 <= last["pass_rate"] <= 1.0
    assert (dataset_dir / "train" / "metrics.jsonl").read_text().count("\n") == 3
    # --resume continues to the new total.
    res = runner.invoke(_app(), ["train", str(dataset_dir), "--policy", "simulated", "--grader", "fake",
                                 "--steps", "5", "--group-size", "4", "--batch-size", "3", "--resume", "--json"])
    assert res.exit_code == 0, res.output
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["steps"] == 5 and last["steps_this_run"] == 2


def test_cli_train_user_errors_are_one_line(dataset_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(_app(), ["train", str(dataset_dir), "--policy", "nope", "--grader", "fake"])
    assert res.exit_code == 1 and "unknown policy 'nope'" in res.output and "Traceback" not in res.output
    res = runner.invoke(_app(), ["train", str(tmp_path / "missing"), "--grader", "fake"])
    assert res.exit_code == 1 and "does not exist" in res.output


# --- real grading on a real generated dataset -----------------------------------------------------------
@pytest.fixture(scope="module")
def inflection_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tasks generated by `taskforge generate pypi:inflection==0.5.1` (mined, validated, audited)."""
    from taskforge.cli import app

    root = tmp_path_factory.mktemp("gen") / "ds"
    res = CliRunner().invoke(app, ["generate", "pypi:inflection==0.5.1", "--out", str(root), "--sandbox", "local",
                                   "--max-tasks", "2", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])["tasks"] >= 1, res.output
    return root


@pytest.mark.slow
@pytest.mark.realrepo
@pytest.mark.parametrize(("policy", "expected"), [("oracle", 1.0), ("null", 0.0)])
def test_cli_train_with_real_grading(inflection_dataset: Path, tmp_path: Path, policy: str, expected: float) -> None:
    from taskforge.cli import app

    log = tmp_path / f"{policy}.jsonl"
    res = CliRunner().invoke(app, ["train", str(inflection_dataset), "--policy", policy, "--sandbox", "local",
                                   "--steps", "2", "--group-size", "2", "--batch-size", "2", "--jobs", "2",
                                   "--log", str(log), "--state", str(tmp_path / "s.json"), "--json"])
    assert res.exit_code == 0, res.output
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["steps"] == 2 and last["pass_rate"] == expected
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["pass_rate"] for x in lines] == [expected, expected]
    assert all(x["grading_seconds"] > 0 for x in lines), lines
    assert all(not x["flags"] for x in lines), lines


def test_live_view_renders_the_latest_step() -> None:
    import io

    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    train(POOL, OraclePolicy(), FakeGrader(), steps=2, group_size=2, batch_size=2, live=True, console=console)
    out = buf.getvalue()
    assert "step 2/2" in out and "pass rate" in out and "1.000" in out


def test_importing_taskforge_rl_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, taskforge.rl, taskforge.cli.train_cmd, taskforge.cli.bench_cmd; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "from taskforge.rl import CurriculumSampler; assert 'torch' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
