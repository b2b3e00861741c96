"""The taskforge curriculum behind verl's curriculum-sampler hook.

verl (``verl.experimental.dataset.sampler``) builds a custom sampler from the data config as
``cls(data_source=dataset, data_config=config.data)``, requires it to be an ``AbstractSampler``, and,
when it is an ``AbstractCurriculumSampler``, calls ``sampler.update(batch=batch)`` after every training
step with the step's ``DataProto``. To use the taskforge curriculum in verl, export the dataset with
``taskforge export DIR --format verl`` and set::

    data.sampler.class_path=pkg://taskforge.rl.verl_adapter
    data.sampler.class_name=VerlCurriculumSampler
    data.dataloader_num_workers=0          # verl requires it: prefetching would freeze the order
    +data.sampler.curriculum.temperature=0.1   # optional: any CurriculumConfig field

What the adapter reads:

* at construction, one row per task from ``data_source.dataframe`` (verl's ``RLHFDataset`` keeps the
  parquet rows there) or from ``data_source[i]``: the task's instance id (``reward_model.ground_truth``,
  else ``extra_info.instance_id``) and its difficulty score (``extra_info.difficulty``, else the
  ``difficulty_score`` column); ``extra_info`` may be a dict or a JSON string;
* at ``update(batch)``, the same instance id for every response in ``batch.non_tensor_batch`` and the
  response's score, ``batch.batch["token_level_scores"].sum(-1)`` (else ``token_level_rewards``). The
  responses of one prompt (verl repeats each prompt ``rollout.n`` times) form one group.

``state_dict``/``load_state_dict`` hold the curriculum state, so verl's stateful dataloader checkpoint
resumes it. When verl is not installed the base class is a plain ``torch.utils.data.Sampler`` with the
same interface (so the adapter imports and is testable without verl).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sized
from typing import Any

from taskforge.core.errors import ConfigError
from taskforge.rl.curriculum import CurriculumConfig, CurriculumSampler, GroupOutcome

try:  # verl's own interface when verl is installed (its factory asserts isinstance AbstractSampler)
    from verl.experimental.dataset.sampler import AbstractCurriculumSampler as _VerlBase
except Exception:  # verl absent (or an old verl without the hook): same interface on torch's Sampler
    from torch.utils.data import Sampler

    class _VerlBase(Sampler[int]):  # type: ignore[no-redef]
        """Stand-in for ``verl.experimental.dataset.sampler.AbstractCurriculumSampler``."""

        def update(self, batch: Any) -> None:  # overridden below
            return None


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            loaded = json.loads(value)
        except json.JSONDecodeError:
            return {}
        return loaded if isinstance(loaded, dict) else {}
    return dict(value) if isinstance(value, Mapping) else {}


def _instance_id(reward_model: Any, extra_info: Any) -> str | None:
    gt = _as_dict(reward_model).get("ground_truth")
    return str(gt) if gt else (_as_dict(extra_info).get("instance_id") or None)


def _get(config: Any, key: str, default: Any = None) -> Any:
    if config is None:
        return default
    getter = getattr(config, "get", None)
    value = getter(key, default) if getter else getattr(config, key, default)
    return default if value is None else value


def _rows(data_source: Any) -> list[dict[str, Any]]:
    frame = getattr(data_source, "dataframe", None)
    if frame is not None:
        cols = set(getattr(frame, "column_names", []) or [])
        n = len(frame)

        def col(name: str) -> list[Any]:
            return list(frame[name]) if name in cols else [None] * n

        return [{"reward_model": r, "extra_info": e, "difficulty_score": d}
                for r, e, d in zip(col("reward_model"), col("extra_info"), col("difficulty_score"), strict=True)]
    return [dict(data_source[i]) for i in range(len(data_source))]


class VerlCurriculumSampler(_VerlBase):
    """``CurriculumSampler`` with verl's constructor and ``update(batch: DataProto)`` (module doc)."""

    def __init__(self, data_source: Sized, data_config: Any = None) -> None:
        rows = _rows(data_source)
        ids, scores = [], []
        for i, row in enumerate(rows):
            iid = _instance_id(row.get("reward_model"), row.get("extra_info"))
            score = _as_dict(row.get("extra_info")).get("difficulty", row.get("difficulty_score"))
            if iid is None or score is None:
                raise ConfigError(f"verl dataset row {i} has no instance id (reward_model.ground_truth) or no "
                                  "difficulty (extra_info.difficulty); export it with `taskforge export --format verl`")
            ids.append(iid)
            scores.append(float(score))
        sampler_cfg = _get(data_config, "sampler", {})
        overrides = _get(sampler_cfg, "curriculum", {})
        config = CurriculumConfig.from_dict({k: overrides[k] for k in overrides}) if overrides else None
        self.instance_ids = ids
        self.index_of = {iid: i for i, iid in enumerate(ids)}
        self.curriculum = CurriculumSampler(scores, seed=int(_get(data_config, "seed", 0)),
                                            batch_size=int(_get(data_config, "train_batch_size", 1)),
                                            num_samples=len(scores), config=config)

    def __iter__(self) -> Iterator[int]:
        return iter(self.curriculum)

    def __len__(self) -> int:
        return len(self.curriculum)

    def outcomes(self, batch: Any) -> list[GroupOutcome]:
        """Per-task groups of response scores in a verl ``DataProto`` (order of first appearance)."""
        tensors = batch.batch
        key = next((k for k in ("token_level_scores", "token_level_rewards") if k in tensors.keys()), None)
        if key is None:
            raise ConfigError("verl batch has neither token_level_scores nor token_level_rewards; "
                              "call update(batch) after the reward step")
        scores = tensors[key].sum(-1).tolist()
        nt = batch.non_tensor_batch
        n = len(scores)
        rms = list(nt["reward_model"]) if "reward_model" in nt else [None] * n
        infos = list(nt["extra_info"]) if "extra_info" in nt else [None] * n
        groups: dict[int, list[float]] = {}
        for rm, info, score in zip(rms, infos, scores, strict=True):
            iid = _instance_id(rm, info)
            if iid is None or iid not in self.index_of:
                continue  # not one of our tasks (a mixed dataset): nothing to learn about it
            groups.setdefault(self.index_of[iid], []).append(float(score))
        return [GroupOutcome(i, tuple(r)) for i, r in groups.items()]

    def update(self, batch: Any) -> None:
        self.curriculum.update(self.outcomes(batch))

    def state_dict(self) -> dict[str, Any]:
        return self.curriculum.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.curriculum.load_state_dict(state)
