"""The curriculum behind verl's sampler hook, fed rows exported with `--format verl` and a DataProto-shaped batch."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Sampler

from taskforge.bench.curriculum import synthetic_pool
from taskforge.core.errors import ConfigError
from taskforge.rl.verl_adapter import VerlCurriculumSampler

TASKS = synthetic_pool(16, seed=2)


@pytest.fixture
def verl_dataset(tmp_path: Path) -> SimpleNamespace:
    """What verl's RLHFDataset holds: the exported parquet loaded with Hugging Face datasets."""
    import datasets
    from taskforge.dataset import Dataset, write_tasks
    from taskforge.dataset.export_verl import export_verl

    write_tasks(tmp_path / "ds", TASKS)
    [train] = export_verl(Dataset.open(tmp_path / "ds"), tmp_path / "verl")
    frame = datasets.load_dataset("parquet", data_files=str(train), split="train")
    return SimpleNamespace(dataframe=frame, __len__=lambda: len(frame))


def _batch(rows: list[tuple[str, float]]) -> SimpleNamespace:
    """A DataProto look-alike: token-level scores (reward on the last token) + non-tensor reward_model."""
    scores = torch.zeros(len(rows), 5)
    scores[:, -1] = torch.tensor([r for _, r in rows])
    rm = np.array([{"style": "rule", "ground_truth": iid} for iid, _ in rows], dtype=object)
    return SimpleNamespace(batch={"token_level_scores": scores}, non_tensor_batch={"reward_model": rm})


def test_reads_ids_and_difficulties_from_verl_rows(verl_dataset) -> None:
    s = VerlCurriculumSampler(verl_dataset, {"seed": 3, "train_batch_size": 4,
                                             "sampler": {"curriculum": {"temperature": 0.2}}})
    assert isinstance(s, Sampler)
    assert s.curriculum.config.temperature == 0.2 and s.curriculum.batch_size == 4
    by_id = {t.instance_id: t.difficulty.score for t in TASKS}
    assert sorted(s.instance_ids) == sorted(by_id)
    for iid, d in zip(s.instance_ids, s.curriculum.difficulties, strict=True):
        assert d == pytest.approx(by_id[iid])
    batch = next(iter(DataLoader(list(range(len(TASKS))), batch_size=4, sampler=s)))
    assert len(set(batch.tolist())) == 4


def test_update_groups_responses_by_task(verl_dataset) -> None:
    s = VerlCurriculumSampler(verl_dataset, {"seed": 0})
    a, b = s.instance_ids[0], s.instance_ids[1]
    rows = [(a, 1.0), (a, 0.0), (a, 1.0), (a, 0.0), (b, 1.0), (b, 1.0), (b, 1.0), (b, 1.0), ("other__x", 1.0)]
    groups = {g.index: g.rewards for g in s.outcomes(_batch(rows))}
    assert groups == {0: (1.0, 0.0, 1.0, 0.0), 1: (1.0, 1.0, 1.0, 1.0)}
    s.update(_batch(rows))
    assert s.curriculum.step == 1
    assert s.curriculum.zero_variance_groups[1] == 1 and s.curriculum.zero_variance_groups[0] == 0
    restored = VerlCurriculumSampler(verl_dataset, {"seed": 0})
    restored.load_state_dict(s.state_dict())
    np.testing.assert_allclose(restored.curriculum.probabilities(), s.curriculum.probabilities())


def test_rows_without_ids_and_batches_without_scores_are_config_errors(verl_dataset) -> None:
    with pytest.raises(ConfigError, match="no instance id"):
        VerlCurriculumSampler([{"extra_info": "{}"}], None)
    s = VerlCurriculumSampler(verl_dataset, None)
    with pytest.raises(ConfigError, match="token_level_scores"):
        s.update(SimpleNamespace(batch={}, non_tensor_batch={}))
