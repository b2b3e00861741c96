"""`taskforge train --policy hf --episodes`: multi-turn episodes end to end on real generated tasks, resumable."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.generated_datasets import generated_dataset

pytest.importorskip("torch")
pytest.importorskip("transformers")

TINY = {"hidden": "32", "layers": "1", "heads": "2", "max_turns": "2", "max_new_tokens": "12",
        "max_positions": "2048", "max_context_tokens": "2048", "max_obs_chars": "200", "micro_batch": "4"}


@pytest.mark.torch
def test_episode_policy_records_trajectories_and_mistake_rates(tmp_path: Path) -> None:
    from taskforge.agent.fake_session import FakeSession
    from taskforge.agent.hf_episode import EpisodeConfig, run_episode
    from taskforge.agent.protocol import ToolError
    from taskforge.rl.policies.hf import chat_tokenizer, tiny_causal_lm

    tok = chat_tokenizer()
    model = tiny_causal_lm(len(tok), hidden=32, layers=1, heads=2, pad_id=tok.pad_token_id, eos_id=tok.eos_token_id)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "a.py").write_text("x = 1\n")
    script = iter(['<tool_call>{"name": "python", "arguments": {}}</tool_call>',
                   '<tool_call>{"name": "create_file", "arguments": {"path": "a.py", "content": "x = 2\\n"}}</tool_call>',
                   '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'])

    def scripted(ctx: object) -> tuple[tuple[int, ...], tuple[float, ...]]:
        ids = tuple(tok(next(script) + "<|im_end|>", add_special_tokens=False)["input_ids"])
        return ids, (-1.0,) * len(ids)

    task = type("T", (), {"problem_statement": "Set x to 2.", "instance_id": "t"})()
    with FakeSession(task, tmp_path / "w") as session:  # type: ignore[arg-type]
        ep = run_episode(model, tok, session, EpisodeConfig(max_turns=5), sampler=scripted)
    assert ep.end_reason == "submitted" and len(ep.turns) == 3
    assert ep.record[0].observation.error is ToolError.UNKNOWN_TOOL and ep.record[0].hint.kind == "unknown_tool"
    assert ep.turns[0].hint_ids and not ep.turns[1].hint_ids  # the hint belongs to the erring turn only
    assert "+x = 2" in ep.patch
    assert tok.decode(ep.turns[1].context_ids).startswith("\n<|im_start|>tool\nunknown tool 'python'")


@pytest.mark.slow
@pytest.mark.realrepo
@pytest.mark.torch
def test_cli_train_hf_episodes_real_tasks_resumes(tmp_path: Path) -> None:
    ds = generated_dataset("inflection==0.5.1", sandbox="local", strategies=("stub",), max_tasks=2)
    ckpt = tmp_path / "ckpt"

    def train(steps: int, *extra: str) -> dict[str, object]:
        argv = [str(Path(__file__).parents[1] / ".venv/bin/taskforge"), "train", str(ds.path), "--policy", "hf", "--episodes",
                "--sandbox", "local", "--steps", str(steps), "--group-size", "2", "--batch-size", "1", "--json",
                "--log", str(tmp_path / "log.jsonl"), "--state", str(tmp_path / "state.json"),
                *[f"--policy-opt={k}={v}" for k, v in TINY.items()], f"--policy-opt=checkpoint_dir={ckpt}", *extra]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    first = train(1)
    assert first["steps"] == 1 and (ckpt / "hf_policy.pt").is_file()
    second = train(2, "--resume")
    assert second["steps"] == 2 and second["steps_this_run"] == 1  # continued from the checkpoint, not restarted
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in log] == [1, 2]
    for x in log:
        assert x["rollouts"] == 2 and x["grading_seconds"] > 0  # real grading of the episodes' diffs
        assert x["policy"]["episodes"] == 2 and x["policy"]["turns_per_episode"] >= 1
        assert sum(v for k, v in x["policy"].items() if k.startswith("end_")) == 2  # why each episode ended
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["step"] == 2 and state["policy"]["updates"] >= 1
