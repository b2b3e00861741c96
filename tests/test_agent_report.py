"""Agentic episodes in the report: the trajectory monitor's findings (turn and evidence) and the end reasons,
read from the training log's episode records, as figures and a table."""

from __future__ import annotations

import json

from taskforge.agent.episode import EndReason, EpisodeRecord
from taskforge.agent.protocol import ToolCall
from taskforge.agent.trajectory_monitor import scan_call
from taskforge.report.data import TrainStep
from taskforge.report.figures import _train_specs
from taskforge.report.html import _trajectory_table


def _line(step: int) -> dict:
    findings = scan_call(ToolCall("bash", json.dumps({"command": "pip download inflection <x>"})), 4)
    record = EpisodeRecord("inflection-1", 0, EndReason.STEP_BUDGET, steps=9, findings=tuple(findings), reward=0.0)
    return {"step": step, "pass_rate": 0.0, "difficulty_mean": 0.3, "difficulty_std": 0.0, "target": None,
            "zero_variance_fraction": 1.0, "grading_seconds": 1.0, "step_seconds": 2.0, "rollouts": 1,
            "episode_end": {"step_budget": 1}, "trajectory_monitor": {"pip_fetch": 1},
            "episodes": [record.to_dict()]}


def test_trajectory_findings_reach_the_report_with_turn_and_evidence() -> None:
    steps = tuple(TrainStep.from_dict(json.loads(json.dumps(_line(k)))) for k in (1, 2))
    assert steps[0].trajectory_monitor == {"pip_fetch": 1} and steps[0].episode_end == {"step_budget": 1}
    assert steps[0].trajectory_findings == (("inflection-1", 4, "bash", "pip_fetch", "pip download inflection <x>"),)
    assert TrainStep.from_dict(json.loads(json.dumps(steps[0].to_dict()))) == steps[0]
    keys = [s.key for s in _train_specs(steps)]
    assert keys[:2] == ["train-trajectory-monitor", "train-episode-end"]
    table = _trajectory_table(steps)
    assert "<td>pip_fetch</td>" in table and "pip download inflection &lt;x&gt;" in table and "<x>" not in table
    assert table.count("<tr>") == 3  # header + one finding per step


def test_a_log_without_episodes_adds_nothing() -> None:
    plain = {k: v for k, v in _line(1).items() if k not in ("episode_end", "trajectory_monitor", "episodes")}
    step = TrainStep.from_dict(plain)
    assert step.trajectory_findings == () and _trajectory_table((step,)) == ""
    assert not any(s.key.startswith(("train-trajectory", "train-episode")) for s in _train_specs((step,)))
