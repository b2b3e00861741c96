"""``taskforge train --replenish`` end to end: the command asks the real pipeline for harder tasks, they are
validated, appended to the dataset, join the pool mid-run, and every request and added task is logged with
its reason in ``DATASET/train/replenish.jsonl``.

The starting dataset is ``minipkg`` (``tests/generate_fixtures.py``) with stub tasks only. The command runs
in-process (typer's ``CliRunner``) with its real ``PipelineTaskSource``; the one seam replaced is the
sandbox (``HostSandbox``, this interpreter, as the pipeline tests use) and the source's ``poll`` waits for
the generation in flight, so a training step (milliseconds with the fake grader) cannot outrun it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from generate_fixtures import make_mini_project
from typer.testing import CliRunner

from sandboxes.fakes import HostSandbox
from taskforge.core.settings import Settings
from taskforge.dataset import Dataset
from taskforge.pipeline.executors import SyncExecutor
from taskforge.pipeline.generate import GenerateOptions, generate
from taskforge.rl import replenish

GENERATION_WAIT_S = 600.0  # under load (6-7 on 2 cores) the generation took over 120 s


class _HostSource(replenish.PipelineTaskSource):
    """The real pipeline-backed source on the host interpreter; ``poll`` waits for what is in flight."""

    made: list[_HostSource] = []

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sandbox = HostSandbox()
        _HostSource.made.append(self)

    def poll(self) -> list[replenish.Delivery]:
        self.wait(GENERATION_WAIT_S)
        return super().poll()


def _app() -> typer.Typer:
    from taskforge.cli import train_cmd

    app = typer.Typer()
    train_cmd.register(app)
    app.command("noop", hidden=True)(lambda: None)  # keep `train` a named sub-command
    return app


@pytest.mark.slow
def test_train_replenish_cli_requests_validates_and_adds_harder_tasks_with_reasons(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    src = make_mini_project(tmp_path / "minipkg")
    settings = Settings.load({"work_dir": str(work), "baseline_runs": 2, "test_timeout_s": 300})
    root = tmp_path / "ds"
    generate([str(src)], root, settings, GenerateOptions(strategies=("stub",), max_tasks=2), SyncExecutor(),
             sandbox=HostSandbox())
    start = Dataset.open(root).tasks()
    assert len(start) == 2 and {t.strategy for t in start} == {"stub"}

    monkeypatch.setenv("TASKFORGE_WORK_DIR", str(work))
    monkeypatch.setenv("TASKFORGE_BASELINE_RUNS", "2")
    monkeypatch.setattr(replenish, "PipelineTaskSource", _HostSource)
    _HostSource.made.clear()
    res = CliRunner().invoke(_app(), ["train", str(root), "--policy", "oracle", "--grader", "fake", "--steps", "3",
                                      "--group-size", "2", "--batch-size", "2", "--jobs", "1", "--replenish",
                                      "--replenish-strategies", "delete,module", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    [source] = _HostSource.made
    assert source.dataset_dir == root and source.strategies == ("delete", "module")

    events = [json.loads(line) for line in (root / "train" / "replenish.jsonl").read_text().splitlines()]
    requested = [e for e in events if e["event"] == "requested"]
    added = [e for e in events if e["event"] == "task_added"]
    assert requested, events
    first = requested[0]
    # Two stub tasks: fewer than the default 8 in the frontier band, so the first step asks.
    assert first["trigger"] == replenish.FRONTIER_THIN and first["step"] == 1 and first["level"] == 1
    assert first["reason"] == "2 tasks believed to pass in [0.2, 0.8] < 8"
    assert first["sources"] == [start[0].source]
    assert added and summary["added_tasks"] == len(added)
    assert all(e["request_id"] == first["request_id"] and e["reason"] == first["reason"]
               and e["trigger"] == first["trigger"] and e["added_step"] == 2 for e in added), events

    ds = Dataset.open(root)  # appended through the writer: the manifest verifies
    new = {t.instance_id: t for t in ds.tasks() if t.instance_id not in {s.instance_id for s in start}}
    assert sorted(new) == sorted(e["instance_id"] for e in added)
    assert {t.strategy for t in new.values()} <= {"delete", "module"}
    for task in new.values():  # validated by the normal contract
        checks = {c.check: c.passed for c in task.validation}
        assert checks.get("gold_patch") is True and checks.get("empty_patch") is True
    # The grown pool was trained on and saved: a resume continues over it.
    state = json.loads((root / "train" / "state.json").read_text())
    assert len(state["pool"]) == len(start) + len(added) == len(state["sampler"]["difficulties"])
    assert state["replenish"]["requests"] == len(requested)
