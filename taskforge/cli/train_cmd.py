"""``taskforge train DATASET``: the built-in RL loop (``taskforge.rl.loop``) from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from taskforge.cli._common import ADVANCED, err_console, settings_from, user_errors
from taskforge.core.errors import ConfigError


def _parse_opts(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise ConfigError(f"--policy-opt expects KEY=VALUE, got {p!r}")
        out[key.strip()] = value
    return out


def train_command(
    dataset: Annotated[Path, typer.Argument(help="Dataset directory (the --out of `taskforge generate`).")],
    policy: Annotated[str, typer.Option(help="oracle | null | simulated | command | openai | hf.")] = "oracle",
    steps: Annotated[int, typer.Option(help="Training steps in total (a resumed run continues up to it).")] = 10,
    group_size: Annotated[int, typer.Option(help="Rollouts (patches) per task per step: G.")] = 4,
    batch_size: Annotated[int, typer.Option(help="Tasks per step.")] = 4,
    sandbox: Annotated[str | None, typer.Option(help="Grading backend: local | docker | auto.")] = None,
    jobs: Annotated[int | None, typer.Option(help="Parallel gradings.")] = None,
    log: Annotated[Path | None, typer.Option(help="JSONL metrics log (default: DATASET/train/metrics.jsonl).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the saved state (sampler, policy, step).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Last line: one JSON object (steps, loss, pass_rate).")] = False,
    sampler: Annotated[str, typer.Option(help="curriculum | uniform.", rich_help_panel=ADVANCED)] = "curriculum",
    filter_zero_variance: Annotated[bool, typer.Option(
        help="DAPO dynamic sampling: drop zero-variance groups and draw again.", rich_help_panel=ADVANCED)] = False,
    state: Annotated[Path | None, typer.Option(
        help="State file (default: DATASET/train/state.json).", rich_help_panel=ADVANCED)] = None,
    grader: Annotated[str, typer.Option(
        help="sandbox: the real reward path; fake: reward 1 iff the patch is the gold patch "
             "(for the simulated policy and for tests).", rich_help_panel=ADVANCED)] = "sandbox",
    command: Annotated[str, typer.Option(help="Agent command line (policy command).", rich_help_panel=ADVANCED)] = "",
    endpoint: Annotated[str, typer.Option(help="OpenAI-compatible base URL (policy openai).",
                                          rich_help_panel=ADVANCED)] = "",
    model: Annotated[str, typer.Option(help="Model name (openai) or path (hf).", rich_help_panel=ADVANCED)] = "",
    agent_timeout: Annotated[float, typer.Option(help="Seconds per agent run or request.",
                                                 rich_help_panel=ADVANCED)] = 600.0,
    policy_opt: Annotated[list[str] | None, typer.Option(
        help="Extra policy option KEY=VALUE (repeatable), e.g. for hf.", rich_help_panel=ADVANCED)] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the sampler and the policy.",
                                             rich_help_panel=ADVANCED)] = None,
    session_backend: Annotated[str, typer.Option(
        help="Agentic episodes in a live sandbox session per rollout: local | docker | auto | none "
             "(default: local for openai, none otherwise).", rich_help_panel=ADVANCED)] = "",
    max_steps: Annotated[int | None, typer.Option(help="Episode budget: model turns (setting agent_max_steps).",
                                                  rich_help_panel=ADVANCED)] = None,
    max_episode_tokens: Annotated[int | None, typer.Option(
        help="Episode budget: generated tokens (setting agent_max_tokens).", rich_help_panel=ADVANCED)] = None,
    episode_timeout: Annotated[float | None, typer.Option(
        help="Episode budget: wall-clock seconds (setting agent_wall_clock_s).", rich_help_panel=ADVANCED)] = None,
    calibrate: Annotated[bool, typer.Option(
        help="Fit per-task difficulties from this run's outcomes and write them to the dataset.",
        rich_help_panel=ADVANCED)] = False,
    replenish: Annotated[bool, typer.Option(
        help="On-demand generation: when the frontier runs thin, generate harder tasks from the same "
             "repositories in the background and add them to the pool (log: DATASET/train/replenish.jsonl).",
        rich_help_panel=ADVANCED)] = False,
    replenish_strategies: Annotated[str, typer.Option(
        help="Strategies for on-demand generation, comma-separated (default: the hardest registered).",
        rich_help_panel=ADVANCED)] = "",
    episodes: Annotated[bool, typer.Option(
        help="hf: multi-turn tool-calling episodes in a session per rollout, GRPO over whole trajectories "
             "(+ turn-local feedback KL).")] = False,
) -> None:
    """Train a policy on a dataset: curriculum sampling, G rollouts per task, real rewards, JSONL metrics."""
    with user_errors():
        from taskforge.rl.curriculum import make_sampler
        from taskforge.rl.grading import FakeGrader, SandboxGrader
        from taskforge.rl.loop import load_tasks, train
        from taskforge.rl.policies import PolicyOptions, dataset_workspaces, make_policy

        settings = settings_from(sandbox=sandbox, jobs=jobs, seed=seed, agent_max_steps=max_steps,
                                 agent_max_tokens=max_episode_tokens, agent_wall_clock_s=episode_timeout)
        backend = session_backend or ("local" if policy == "openai" or episodes else "none")
        if backend not in ("local", "docker", "auto", "none"):
            raise ConfigError(f"--session-backend must be local, docker, auto or none, got {backend!r}")
        sessions = None
        if backend != "none":
            from taskforge.agent.environments import dataset_sessions

            sessions = dataset_sessions(dataset, backend=backend, settings=settings)
        tasks = load_tasks(dataset)
        if grader not in ("sandbox", "fake"):
            raise ConfigError(f"--grader must be sandbox or fake, got {grader!r}")
        if episodes and policy != "hf":
            raise ConfigError(f"--episodes is for --policy hf (got --policy {policy})")
        extra = {**_parse_opts(policy_opt or []), **({"episodes": "1"} if episodes else {})}
        options = PolicyOptions(seed=settings.seed, command=command, endpoint=endpoint, model=model,
                                timeout_s=agent_timeout, extra=extra,
                                workspace=dataset_workspaces(dataset) if policy in ("command", "hf") else None,
                                sessions=sessions)
        chosen = make_policy(policy, options)
        grading = FakeGrader() if grader == "fake" else SandboxGrader(dataset, settings)
        from taskforge.rl.curriculum import effective_difficulties
        from taskforge.rl.loop import dataset_calibration

        task_sampler = make_sampler(sampler, effective_difficulties(tasks, dataset_calibration(dataset)),
                                    seed=settings.seed, batch_size=batch_size)
        run_dir = dataset / "train"
        replenisher = None
        if replenish:
            from taskforge.rl.replenish import PipelineTaskSource, Replenisher

            strategies = tuple(s.strip() for s in replenish_strategies.split(",") if s.strip()) or None
            replenisher = Replenisher(PipelineTaskSource(dataset, settings, strategies=strategies, seed=settings.seed),
                                      log_path=run_dir / "replenish.jsonl")
        log_path = log or run_dir / "metrics.jsonl"
        result = train(tasks, chosen, grading, steps=steps, group_size=group_size, batch_size=batch_size,
                       sampler=task_sampler, log_path=log_path, state_path=state or run_dir / "state.json",
                       resume=resume, seed=settings.seed, filter_zero_variance=filter_zero_variance,
                       live=err_console.is_terminal, console=err_console, calibrate=calibrate,
                       calibrate_to=dataset, replenisher=replenisher)
        if replenisher is not None:
            replenisher.close()
    summary = {**result.to_dict(), "policy": policy, "sampler": sampler, "log": str(log_path)}
    err_console.print(f"trained {summary['steps_this_run']} step(s) (total {result.steps}); "
                      f"last pass rate {summary['pass_rate']}; log {log_path}", highlight=False)
    if as_json:
        print(json.dumps(summary))


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
