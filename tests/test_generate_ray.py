"""The generator on a local Ray instance gives the tasks the synchronous executor gives."""

from __future__ import annotations

import generate_fixtures
import pytest
from generate_fixtures import make_mini_project

from sandboxes.fakes import HostSandbox
from taskforge.core.settings import Settings
from taskforge.dataset.reader import Dataset
from taskforge.pipeline.executors import SyncExecutor, make_executor
from taskforge.pipeline.generate import GenerateOptions, generate


@pytest.mark.ray
def test_ray_executor_generates_the_same_dataset_as_sync(tmp_path):
    ray = pytest.importorskip("ray")
    # Ray workers import stage functions by module; the test seam module is shipped by value
    ray.cloudpickle.register_pickle_by_value(generate_fixtures)
    src = make_mini_project(tmp_path / "minipkg")
    options = GenerateOptions(strategies=("stub", "module"), max_candidates=3)
    results = {}
    for kind in ("sync", "ray"):
        settings = Settings.load({"work_dir": str(tmp_path / f"work-{kind}"), "baseline_runs": 2, "jobs": 2})
        executor = SyncExecutor() if kind == "sync" else make_executor("ray", 2)
        try:
            summary = generate([str(src)], tmp_path / kind, settings, options, executor, sandbox=HostSandbox())[0]
        finally:
            executor.close()
        assert not summary.error and summary.tasks >= 2, summary
        results[kind] = (sorted(t.instance_id for t in Dataset.open(tmp_path / kind).tasks()), summary.funnel)
    assert results["ray"] == results["sync"]
