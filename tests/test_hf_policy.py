"""The hf policy: tokenizer and model built in code, prompts, completion -> patch, GRPO updates, the loop."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from strategies import sample_task  # noqa: E402

from taskforge.core.errors import ConfigError  # noqa: E402
from taskforge.core.patches import apply, diff  # noqa: E402
from taskforge.core.task import Task  # noqa: E402
from taskforge.rl.completion_patch import completion_to_patch, splice  # noqa: E402
from taskforge.rl.grading import FakeGrader, GradedGroup, GradeResult  # noqa: E402
from taskforge.rl.loop import train  # noqa: E402
from taskforge.rl.policies import PolicyOptions, make_policy  # noqa: E402
from taskforge.rl.policies.hf import HFPolicy, _Sample, byte_tokenizer  # noqa: E402

pytestmark = pytest.mark.torch

BROKEN = '''"""Demo module."""
import re

_WORD = re.compile(r"\\w+")


def helper(text):
    return _WORD.findall(text)


class Counter:
    """Counts words."""

    def count(self, text, lower=False):
        """Number of words in ``text``."""
        raise NotImplementedError
'''
ORIGINAL = BROKEN.replace("        raise NotImplementedError\n", "        return len(helper(text))\n")
FILES = {"demo/mod.py": BROKEN}
TINY = {"hidden": "32", "layers": "1", "heads": "2", "max_new_tokens": "12", "max_prompt_tokens": "256",
        "max_positions": "512"}


def demo_task(i: int = 1) -> Task:
    base = sample_task(i)
    return dataclasses.replace(base, setup_patch=diff({"demo/mod.py": ORIGINAL}, {"demo/mod.py": BROKEN}),
                               patch=diff({"demo/mod.py": BROKEN}, {"demo/mod.py": ORIGINAL}),
                               problem_statement="Implement `Counter.count(text, lower=False)`: the number of words.")


@contextlib.contextmanager
def workspace(task: Task) -> Iterator[Path]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for rel, text in FILES.items():
            (Path(d) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(d) / rel).write_text(text)
        yield Path(d)


def tiny_policy(**extra: str) -> HFPolicy:
    policy = make_policy("hf", PolicyOptions(seed=0, workspace=workspace, extra={**TINY, **extra}))
    assert isinstance(policy, HFPolicy)
    return policy


# --- tokenizer and splice ----------------------------------------------------------------------------
def test_byte_tokenizer_round_trips_any_text_and_has_distinct_pad_and_eos() -> None:
    tok = byte_tokenizer()
    assert len(tok) == 258 and tok.pad_token_id != tok.eos_token_id
    for text in ("def f(x):\n    return x  # ok\n", "naïve – ünïcode ✓", "\t\r\n\x00"):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == len(text.encode()) and tok.decode(ids) == text


def test_splice_replaces_the_stubbed_method_in_place_and_the_patch_applies(tmp_path: Path) -> None:
    completion = "```python\ndef count(self, text, lower=False):\n    return len(helper(text))\n```\ntrailing prose"
    prop = completion_to_patch(completion, FILES)
    assert prop.path == "demo/mod.py" and prop.expected_signature == "def count(self, text, lower=False)"
    assert prop.module_source == ORIGINAL.replace('        """Number of words in ``text``."""\n', "")
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo/mod.py").write_text(BROKEN)
    apply(prop.patch, tmp_path)
    assert (tmp_path / "demo/mod.py").read_text() == prop.module_source


def test_splice_appends_a_definition_the_file_lacks_and_keeps_other_bytes() -> None:
    out = splice(BROKEN, "def shout(text):\n    return text.upper()\n")
    assert out is not None
    spliced, replaced = out
    assert replaced == {} and spliced.startswith(BROKEN) and spliced.endswith("\n\ndef shout(text):\n    return text.upper()\n")


def test_diff_completion_is_taken_as_is_and_garbage_gives_the_empty_patch() -> None:
    gold = demo_task().patch
    assert completion_to_patch(f"Here you go:\n```diff\n{gold}```", FILES).patch == gold
    assert completion_to_patch("def count(self, text:\n  ???", FILES).patch == ""
    assert completion_to_patch("just words, no code", FILES).patch == ""


# --- policy ------------------------------------------------------------------------------------------
def test_prompt_has_statement_and_broken_file_but_not_the_answer() -> None:
    policy = tiny_policy()
    prompt = policy.prompt(demo_task())
    assert "Implement `Counter.count" in prompt and "raise NotImplementedError" in prompt
    assert "return len(helper(text))" not in prompt  # the deleted body is nowhere in the prompt
    assert prompt.index("### File: demo/mod.py") < prompt.index("### Task") < prompt.index("### Implementation")


def test_propose_returns_n_patches_and_update_trains_the_model() -> None:
    policy = tiny_policy(optimizer="muon", lr="0.01")
    task = demo_task()
    patches = policy.propose(task, 3)
    assert len(patches) == 3 and all(isinstance(p, str) for p in patches)
    before = [p.detach().clone() for p in policy.model.parameters()]
    group = GradedGroup(0, task, tuple(patches), tuple(GradeResult(task.instance_id, r) for r in (1.0, 0.0, 0.0)))
    metrics = policy.update([group])
    assert {"loss", "pg_loss", "kl", "steps_per_s", "rollouts"} <= set(metrics)
    assert metrics["rollouts"] == 3.0 and metrics["grad_norm"] > 0
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, policy.model.parameters(), strict=True))
    assert policy.update([group])["rollouts"] == 0.0  # rollouts are consumed once


def test_failed_rollout_with_an_undefined_name_gets_a_hint_in_the_teacher_context() -> None:
    policy = tiny_policy()
    code = "def count(self, text, lower=False):\n    return len(tokenize(text))\n"
    sample = _Sample((1, 2, 3), (4, 5), completion_to_patch(code, FILES))
    hint_ids = policy.hint_for(sample, GradeResult("x", 0.0))
    text = policy.tokenizer.decode(list(hint_ids))
    assert text.startswith("# Hint:") and "`tokenize`" in text
    assert policy.hint_for(sample, GradeResult("x", 1.0)) == ()  # a success gets no hint
    good = _Sample((1,), (2,), completion_to_patch(code.replace("tokenize", "helper"), FILES))
    assert policy.hint_for(good, GradeResult("x", 0.0)) == ()  # nothing explainable: no hint
    no_feedback = tiny_policy(feedback="0")
    assert no_feedback.hint_for(sample, GradeResult("x", 0.0)) == ()


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown hf policy option"):
        make_policy("hf", PolicyOptions(extra={"learning_rate_typo": "1"}))
    with pytest.raises(ConfigError, match="not a float"):
        make_policy("hf", PolicyOptions(extra={"lr": "fast"}))
    with pytest.raises(ConfigError, match="not a directory"):
        make_policy("hf", PolicyOptions(model="/nonexistent/model"))


def test_state_round_trip_through_a_checkpoint(tmp_path: Path) -> None:
    a = tiny_policy(checkpoint_dir=str(tmp_path / "ckpt"))
    task = demo_task()
    patches = a.propose(task, 2)
    a.update([GradedGroup(0, task, tuple(patches), (GradeResult("x", 1.0), GradeResult("x", 0.0)))])
    state = json.loads(json.dumps(a.state_dict()))
    b = tiny_policy(seed="0")
    b.load_state_dict(state)
    assert b.updates == 1
    for pa, pb in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_local_model_directory_loads_without_network(tmp_path: Path) -> None:
    src = tiny_policy()
    src.model.save_pretrained(tmp_path / "m")
    src.tokenizer.save_pretrained(tmp_path / "m")
    loaded = make_policy("hf", PolicyOptions(model=str(tmp_path / "m"), extra={"max_new_tokens": "4"}))
    assert isinstance(loaded, HFPolicy)
    for pa, pb in zip(src.model.parameters(), loaded.model.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert len(loaded.propose(demo_task(), 2)) == 2


def test_the_rl_loop_runs_the_hf_policy_end_to_end(tmp_path: Path) -> None:
    tasks = [demo_task(i) for i in range(3)]
    policy = tiny_policy(optimizer="muon")
    result = train(tasks, policy, FakeGrader(), steps=2, group_size=2, batch_size=2, log_path=tmp_path / "log.jsonl",
                   state_path=tmp_path / "state.json", seed=0)
    assert result.steps == 2
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all("loss" in x["policy"] and "kl" in x["policy"] for x in lines)
    assert all(x["rollouts"] == 4 for x in lines)


@pytest.mark.slow
@pytest.mark.realrepo
def test_cli_train_hf_with_real_grading(tmp_path: Path) -> None:
    """`taskforge train --policy hf` on real inflection stub tasks, graded in the local sandbox."""
    from reward_fixtures import INFLECTION_SPEC, build_stub_task, fetch_inflection

    from taskforge.dataset import DatasetWriter

    orig = fetch_inflection(tmp_path / "sdist")
    tasks = [build_stub_task(orig, tmp_path / fn, module="inflection/__init__.py", function=fn,
                             spec=INFLECTION_SPEC, repo="inflection") for fn in ("camelize", "parameterize")]
    root = tmp_path / "ds"
    with DatasetWriter(root) as w:
        for t in tasks:
            w.add_repo_archive("inflection", t.base_commit, orig)
            w.add(t)
    argv = [str(Path(__file__).parents[1] / ".venv/bin/taskforge"), "train", str(root), "--policy", "hf",
            "--sandbox", "local", "--steps", "2", "--group-size", "2", "--batch-size", "2", "--jobs", "2",
            "--json", "--grader", "sandbox", *[f"--policy-opt={k}={v}" for k, v in TINY.items()],
            f"--policy-opt=dataset={root}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    assert last["steps"] == 2 and last["pass_rate"] == 0.0 and last["loss"] is not None
    log = [json.loads(x) for x in Path(last["log"]).read_text().splitlines()]
    assert all(x["rollouts"] == 4 and x["grading_seconds"] > 0 for x in log)
