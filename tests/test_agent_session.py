"""Agentic episodes end to end (issue 17, done-when 1): a scripted OpenAI-compatible endpoint drives the
``openai`` policy through a live session on a REAL generated task; the real grader scores the session's diff.

- the scripted solver (edits built from the gold patch, through ``str_replace``) gets 1;
- the null agent (submits at once) gets 0;
- an agent that calls a missing tool gets a structured error that names the available tools, and the
  episode goes on;
on the local jail and on docker. The episode records reach the training log with the trajectory
monitor's findings (the solver looks at the pip cache and the git history on purpose).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_scripts import MISSING_TOOL_SCRIPT, NULL_SCRIPT, solver_script
from generated_datasets import generated_dataset

from taskforge.agent.environments import dataset_sessions
from taskforge.agent.episode import EndReason, EpisodeBudget
from taskforge.agent.fake_endpoint import ScriptedEndpoint
from taskforge.core.settings import Settings
from taskforge.rl.grading import SandboxGrader
from taskforge.rl.loop import train
from taskforge.rl.policies import PolicyOptions, make_policy

pytestmark = [pytest.mark.slow, pytest.mark.realrepo]
BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]
BUDGET = EpisodeBudget(max_steps=10, max_tokens=10_000, wall_clock_s=300, call_timeout_s=60)


@pytest.fixture(scope="module")
def dataset():  # noqa: ANN201
    return generated_dataset("inflection==0.5.1", sandbox="local", strategies=("stub",), max_tasks=2)


def _policy(url: str, dataset, backend: str):  # noqa: ANN001, ANN202
    settings = Settings(work_dir=dataset.work_dir)
    sessions = dataset_sessions(dataset.path, backend=backend, settings=settings, budget=BUDGET)
    return make_policy("openai", PolicyOptions(endpoint=url, model="scripted", sessions=sessions, timeout_s=30))


def _grade(dataset, task, patch: str) -> float:  # noqa: ANN001
    return SandboxGrader(dataset.path, Settings(work_dir=dataset.work_dir)).grade([(task, patch)])[0].reward


@pytest.mark.parametrize("backend", BACKENDS)
def test_scripted_agent_solves_a_real_task_and_the_null_agent_does_not(dataset, backend: str) -> None:
    task = dataset.tasks()[0]
    endpoint = ScriptedEndpoint(solver_script(task))
    with endpoint as url:
        policy = _policy(url, dataset, backend)
        [patch] = policy.propose(task, 1)
    [record] = policy.drain_episodes()
    assert record.end_reason is EndReason.SUBMITTED and record.steps == 5 and record.tool_errors == {}
    shown = [m["content"] for m in endpoint.tool_messages()]
    assert shown[-1].startswith("[run_tests: PASS:") and " passed" in shown[-1]
    assert "edited inflection/__init__.py" in shown[-2]
    assert "NotImplementedError" in shown[1]  # view_file showed the broken workspace
    assert {(f.rule, f.line) for f in record.findings} >= {("cache_read", 1), ("git_history", 1)}
    assert "NotImplementedError" in patch and _grade(dataset, task, patch) == 1.0

    with ScriptedEndpoint(NULL_SCRIPT) as url:
        policy = _policy(url, dataset, backend)
        [empty] = policy.propose(task, 1)
    assert empty == "" and policy.drain_episodes()[0].end_reason is EndReason.SUBMITTED
    assert _grade(dataset, task, empty) == 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_tool_gets_a_structured_error_naming_the_tools(dataset, backend: str) -> None:
    task = dataset.tasks()[0]
    endpoint = ScriptedEndpoint(MISSING_TOOL_SCRIPT)
    with endpoint as url:
        policy = _policy(url, dataset, backend)
        policy.propose(task, 1)
    [record] = policy.drain_episodes()
    assert record.end_reason is EndReason.SUBMITTED and record.steps == 3
    assert record.tool_errors == {"bad_json": 1, "unknown_tool": 1}
    unknown, bad = (m["content"] for m in endpoint.tool_messages())
    assert unknown.startswith("[error: unknown_tool]") and "search_repo" in unknown
    assert "available tools are: bash, view_file, str_replace, create_file, run_tests, submit" in unknown
    assert bad.startswith("[error: bad_json]") and '{"command": <string>}' in bad


def test_episode_records_reach_the_training_log(dataset, tmp_path: Path) -> None:
    task = dataset.tasks()[0]
    log = tmp_path / "metrics.jsonl"
    with ScriptedEndpoint(solver_script(task)) as url:
        policy = _policy(url, dataset, "local")
        grader = SandboxGrader(dataset.path, Settings(work_dir=dataset.work_dir))
        train([task], policy, grader, steps=1, group_size=1, batch_size=1, log_path=log)
    [line] = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["episode_end"] == {"submitted": 1} and line["pass_rate"] == 1.0
    assert line["trajectory_monitor"]["cache_read"] == 1 and line["trajectory_monitor"]["git_history"] == 1
    [episode] = line["episodes"]
    assert episode["reward"] == 1.0 and episode["step"] == 1 and episode["instance_id"] == task.instance_id
    assert {f["rule"] for f in episode["findings"]} >= {"cache_read", "git_history"}


def test_train_cli_runs_openai_episodes_in_sessions(dataset, tmp_path: Path) -> None:
    import os

    from generated_datasets import ROOT, cli

    from taskforge.core.process import run_capture

    log = tmp_path / "metrics.jsonl"
    with ScriptedEndpoint(NULL_SCRIPT) as url:
        argv = [*cli(), "train", str(dataset.path), "--policy", "openai", "--endpoint", url, "--model", "scripted",
                "--steps", "1", "--group-size", "2", "--batch-size", "1", "--log", str(log),
                "--state", str(tmp_path / "state.json"), "--session-backend", "local", "--max-steps", "4", "--json"]
        rc, out = run_capture(argv, 600, cwd=ROOT, env={**os.environ, "TASKFORGE_WORK_DIR": str(dataset.work_dir)})
    assert rc == 0, out[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["pass_rate"] == 0.0
    [line] = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["episode_end"] == {"submitted": 2} and len(line["episodes"]) == 2
    assert {e["instance_id"] for e in line["episodes"]} <= {t.instance_id for t in dataset.tasks()}
