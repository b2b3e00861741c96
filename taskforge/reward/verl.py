"""A verl-style reward function: point ``custom_reward_function.path`` at this file, name ``compute_score``.

    compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float

``solution_str`` holds the agent's patch (a unified diff, bare or inside a fenced ```diff block; the
last diff wins); ``ground_truth`` is the task's ``instance_id`` (the dataset's ``reward_model``
column). The dataset directory comes from ``extra_info["dataset_dir"]`` (``extra_info`` may be a
dict or its JSON encoding) or the ``TASKFORGE_DATASET`` environment variable; the sandbox backend
from ``TASKFORGE_SANDBOX`` (``local`` | ``docker`` | ``auto``, default ``local``). Datasets, sandboxes
and prepared environments are opened once per worker process and reused.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

from taskforge.core.errors import ConfigError
from taskforge.core.settings import Settings
from taskforge.reward.reward import EnvCache, RewardResult, reward

_FENCE = re.compile(r"```(?:diff|patch|udiff)?[ \t]*\n(.*?)```", re.DOTALL)
_DIFF_START = re.compile(r"^(diff --git |--- (?:a/|/dev/null))", re.MULTILINE)


def extract_patch(solution_str: str) -> str:
    """The unified diff inside a model response: the last fenced diff block, else from the first header."""
    blocks = [b for b in _FENCE.findall(solution_str or "") if _DIFF_START.search(b)]
    if blocks:
        text = blocks[-1]
    else:
        m = _DIFF_START.search(solution_str or "")
        text = solution_str[m.start():] if m else ""
    return text if not text or text.endswith("\n") else text + "\n"


def _extra(extra_info: Any) -> dict[str, Any]:
    if isinstance(extra_info, str):
        try:
            extra_info = json.loads(extra_info)
        except ValueError:
            return {}
    return dict(extra_info) if isinstance(extra_info, dict) else {}


@functools.lru_cache(maxsize=8)
def _dataset(root: str) -> Any:
    from taskforge.dataset import Dataset

    return Dataset.open(root)


@functools.lru_cache(maxsize=4)
def _grader(sandbox: str) -> tuple[Any, EnvCache, Settings]:
    from sandboxes.selection import make_sandbox

    settings = Settings.load({"sandbox": sandbox})
    return make_sandbox(settings), EnvCache(), settings


def grade_solution(solution_str: str, ground_truth: str, extra_info: Any = None) -> RewardResult:
    """The full ``RewardResult`` behind ``compute_score``."""
    from taskforge.reward.workspace import DatasetTrees

    extra = _extra(extra_info)
    root = str(extra.get("dataset_dir") or os.environ.get("TASKFORGE_DATASET") or "")
    if not root:
        raise ConfigError("compute_score needs the dataset directory: set TASKFORGE_DATASET or "
                          "extra_info['dataset_dir']")
    task = _dataset(str(Path(root).resolve())).get(str(ground_truth))
    sandbox, envs, settings = _grader(os.environ.get("TASKFORGE_SANDBOX", "local"))
    return reward(task, extract_patch(solution_str), sandbox=sandbox, trees=DatasetTrees(Path(root)),
                  settings=settings, envs=envs)


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
    """verl's reward-function signature: 1.0 when the patch passes every hidden and kept test, else 0.0."""
    return grade_solution(solution_str, ground_truth, extra_info).score
