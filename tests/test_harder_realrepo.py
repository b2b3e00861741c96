"""Feature-level and composed tasks on a real PyPI package, checked without taskforge's runner.

``inflection==0.5.1``: generate ``feature`` tasks, compose two of them into one, and then, for each, in
a fresh virtualenv on the original sdist with plain ``git apply`` and plain pytest: ``setup_patch`` ->
every PASS_TO_PASS test passes; ``test_patch`` -> every FAIL_TO_PASS test fails; ``patch`` ->
everything passes. The composed task also holds under the reward path (``taskforge validate``'s check).
"""

from __future__ import annotations

import pytest
from test_generate_realrepo import PACKAGE, VERSION, reverify_plainly, sdist_and_venv  # noqa: F401

from taskforge.core.settings import Settings
from taskforge.dataset.reader import Dataset
from taskforge.pipeline.compose import ComposeOptions, compose
from taskforge.pipeline.executors import SyncExecutor
from taskforge.pipeline.generate import GenerateOptions, generate

pytestmark = [pytest.mark.realrepo, pytest.mark.slow]


def test_feature_and_composed_tasks_hold_and_reverify_with_plain_git_and_pytest(tmp_path, sdist_and_venv) -> None:  # noqa: F811
    from sandboxes.selection import make_sandbox
    from taskforge.reward.reward import reward_many
    from taskforge.reward.workspace import DatasetTrees

    archive, python = sdist_and_venv
    # one repeat, no battery: this checks the new tiers' tasks, not the contract's repeats or stand-ins; and
    # every forge chance: 4 of inflection's 5 feature candidates hide only tests driven by its module-level
    # tables (no expected literal to plant changed copies of), rejected as weakly_guarded by default
    settings = Settings.load().with_(validation_repeats=1, battery=False, max_forge_chance=1.0)
    out, composed = tmp_path / "features", tmp_path / "composed"
    summaries = generate([f"pypi:{PACKAGE}=={VERSION}"], out, settings,
                         GenerateOptions(strategies=("feature",), max_tasks=2), SyncExecutor())
    assert not summaries[0].error and summaries[0].accepted == {"feature": 2}, summaries[0]
    done = compose(out, composed, settings, ComposeOptions(k=2, max_tasks=1), SyncExecutor())
    assert [s.tasks for s in done] == [1], done
    features, (combo,) = Dataset.open(out).tasks(), Dataset.open(composed).tasks()
    assert combo.strategy == "compose" and combo.difficulty.tier == 4
    assert set(combo.fail_to_pass) == {n for t in features for n in t.fail_to_pass}
    assert set(combo.entities) == {q for t in features for q in t.entities}
    assert all(t.difficulty.tier == 3 and t.difficulty.entities_deleted >= 2 for t in features)
    assert combo.difficulty.score >= max(t.difficulty.score for t in features)
    assert all("## Interfaces to restore" in t.problem_statement for t in (*features, combo))

    gold, empty = reward_many([(combo, combo.patch), (combo, "")], sandbox=make_sandbox(settings),
                              trees=DatasetTrees(composed), settings=settings)
    assert gold.score == 1.0 and empty.score == 0.0 and empty.fraction == 0.0

    for task in (*features, combo):
        reverify_plainly(task, archive, python, tmp_path)
