"""The reward's entry points: ``reward_many``, the ``taskforge reward`` CLI and verl's ``compute_score``,
on a dataset written with the real ``DatasetWriter`` (repo archive included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reward_fixtures import MINILIB, MINILIB_SPEC, build_stub_task, write_tree
from typer.testing import CliRunner

from sandboxes.fakes import SubprocessSandbox
from taskforge.core.task import Task
from taskforge.dataset import DatasetWriter
from taskforge.reward.result import RewardFlag
from taskforge.reward.reward import RewardResult, reward_many
from taskforge.reward.verl import extract_patch
from taskforge.reward.workspace import DatasetTrees, DirectoryTrees


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, Path, Path]:
    base = tmp_path_factory.mktemp("api")
    orig = write_tree(base / "orig", MINILIB)
    task = build_stub_task(orig, base, module="minilib/text.py", function="shout", spec=MINILIB_SPEC,
                           repo="minilib")
    ds = base / "dataset"
    with DatasetWriter(ds) as w:
        w.add_repo_archive(task.repo, task.base_commit, orig)
        w.add(task)
    return task, orig, ds


def test_reward_many_keeps_order_and_grades_from_the_dataset_archive(built: tuple[Task, Path, Path]) -> None:
    task, orig, ds = built
    pairs = [(task, task.patch), (task, ""), (task, task.patch)]
    results = reward_many(pairs, sandbox=SubprocessSandbox(), trees=DatasetTrees(ds), jobs=2, timeout_s=120)
    assert [r.score for r in results] == [1.0, 0.0, 1.0]
    assert results[1].fraction == 0.0 and results[0].fraction == 1.0
    assert set(results[0].outcomes) == set(task.fail_to_pass) | set(task.pass_to_pass)
    assert results[0].timings["run_s"] > 0
    again = RewardResult.from_dict(json.loads(json.dumps(results[0].to_dict())))
    assert again == results[0]
    # a directory provider gives the same verdicts
    direct = reward_many(pairs[:2], sandbox=SubprocessSandbox(), trees=DirectoryTrees(orig), jobs=1)
    assert [r.score for r in direct] == [1.0, 0.0]


def test_cli_json_last_line(built: tuple[Task, Path, Path], tmp_path: Path) -> None:
    from taskforge.cli import app

    task, _, ds = built
    gold = tmp_path / "gold.diff"
    gold.write_text(task.patch)
    empty = tmp_path / "empty.diff"
    empty.write_text("")
    runner = CliRunner()
    for path, want in ((gold, 1.0), (empty, 0.0)):
        res = runner.invoke(app, ["reward", str(ds), task.instance_id, "--patch", str(path), "--json"])
        assert res.exit_code == 0, res.output
        last = json.loads(res.stdout.strip().splitlines()[-1])
        assert last["reward"] == want and "fraction" in last and isinstance(last["flags"], list)
    res = runner.invoke(app, ["reward", str(ds), "no-such-task", "--patch", str(gold)])
    assert res.exit_code == 1 and "no task 'no-such-task'" in res.output


def test_verl_compute_score(built: tuple[Task, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from taskforge.reward.verl import compute_score

    task, _, ds = built
    monkeypatch.setenv("TASKFORGE_SANDBOX", "local")
    response = f"I restored the function.\n```diff\n{task.patch}```\nDone."
    extra = json.dumps({"dataset_dir": str(ds)})
    assert compute_score("taskforge", response, task.instance_id, extra) == 1.0
    assert compute_score("taskforge", "I could not do it.", task.instance_id, {"dataset_dir": str(ds)}) == 0.0


def test_extract_patch_prefers_the_last_fenced_diff() -> None:
    one = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    two = one.replace("+b", "+c")
    assert extract_patch(f"text\n```diff\n{one}```\nmore\n```diff\n{two}```") == two
    assert extract_patch(f"Here:\n{one}") == one
    assert extract_patch("no diff at all") == ""


def _with_frame_peek(gold: str) -> str:
    """The gold patch plus a line that reads the caller's frame: it still implements the feature."""
    lines = gold.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("+") and "return" in ln)
    indent = lines[at][1:len(lines[at]) - len(lines[at][1:].lstrip())]
    lines.insert(at, f"+{indent}import sys; _peek = sys._getframe(1).f_locals\n")
    out = "".join(lines)
    # the hunk grew by one added line: fix its header
    import re

    def grow(m: re.Match[str]) -> str:
        return f"@@ -{m.group(1)} +{m.group(2)},{int(m.group(3)) + 1} @@"
    return re.sub(r"@@ -(\S+) \+(\d+),(\d+) @@", grow, out, count=1)


def test_the_patch_monitor_flags_with_evidence_and_can_zero(built: tuple[Task, Path, Path]) -> None:
    from taskforge.core.settings import Settings

    task, orig, _ = built
    peek = _with_frame_peek(task.patch)
    lenient = Settings.load({"monitor_zero": False})
    flagged, = reward_many([(task, peek)], sandbox=SubprocessSandbox(), trees=DirectoryTrees(orig), jobs=1,
                           settings=lenient)
    assert flagged.score == 1.0, flagged  # it works: with monitor_zero off the monitor reports, it does not judge
    assert RewardFlag.SUSPICIOUS in flagged.flags and "suspicious:frame_inspection" in flagged.flag_names
    hit = next(f for f in flagged.findings if f.rule == "frame_inspection")
    assert hit.path == "minilib/text.py" and "_getframe" in hit.evidence
    assert RewardResult.from_dict(json.loads(json.dumps(flagged.to_dict()))) == flagged
    zeroed, gold = reward_many([(task, peek), (task, task.patch)], sandbox=SubprocessSandbox(),
                               trees=DirectoryTrees(orig), jobs=1)  # the default zeroes
    assert zeroed.score == 0.0 and "frame_inspection" in zeroed.detail
    assert gold.score == 1.0 and not gold.findings  # the honest gold patch is not flagged


def test_a_test_deadline_reaches_only_trusted_gradings(built: tuple[Task, Path, Path]) -> None:
    """``test_deadline_s`` (the battery's stand-ins) is ignored for an agent's patch: an untrusted grading's run
    request never carries it, whatever the caller passes."""
    from taskforge.reward.reward import reward

    task, orig, _ = built
    seen: list[tuple[float, dict]] = []

    class Recording(SubprocessSandbox):
        def run(self, env, workspace, request):  # type: ignore[no-untyped-def]
            seen.append((request.test_deadline_s, dict(request.test_deadlines)))
            return super().run(env, workspace, request)

    box = Recording()
    own = {task.fail_to_pass[0]: 9.0}
    assert reward(task, task.patch, sandbox=box, trees=DirectoryTrees(orig), test_deadline_s=3.0,
                  test_deadlines=own).score == 1.0
    assert reward(task, task.patch, sandbox=box, trees=DirectoryTrees(orig), test_deadline_s=3.0,
                  test_deadlines=own, trusted=True).score == 1.0
    assert seen[0] == (0.0, {})
    deadline, given = seen[1]
    assert deadline == 3.0 and {n: given[n] for n in own} == own
    # and the trusted grading's must-fail canaries, which can only fail sooner (CANARY_DEADLINE_S)
    assert set(given.values()) - {9.0} == {0.5} and len(given) > len(own), given


def test_gradings_of_one_battery_run_their_tests_in_one_order(built: tuple[Task, Path, Path]) -> None:
    """Trusted gradings with one ``plan_seed`` (a battery's stand-ins) get one order of test ids, so a stand-in
    graded up to another's first failure runs what that one ran; an agent's grading is shuffled afresh."""
    from taskforge.reward.reward import reward

    task, orig, _ = built
    seen: list[tuple[str, ...]] = []

    class Recording(SubprocessSandbox):
        def run(self, env, workspace, request):  # type: ignore[no-untyped-def]
            seen.append(tuple(a for a in request.tests if "::" in a))
            return super().run(env, workspace, request)

    box = Recording()
    for _ in range(2):
        reward(task, task.patch, sandbox=box, trees=DirectoryTrees(orig), trusted=True, plan_seed=7)
    for _ in range(3):
        reward(task, task.patch, sandbox=box, trees=DirectoryTrees(orig))
    assert len(seen[0]) >= 6 and seen[0] == seen[1]
    assert len({seen[2], seen[3], seen[4]}) > 1  # canary ids differ too: never one order for untrusted gradings
