"""The executor seam: same picklable function, same results, whichever executor runs it."""

from __future__ import annotations

import pytest

from taskforge.core.errors import ConfigError
from taskforge.pipeline.executors import ProcessExecutor, SyncExecutor, make_executor


def square_or_fail(x: int) -> int:
    if x == 3:
        raise ValueError("bad item 3")
    return x * x


def _collect(executor, items):
    try:
        return dict(executor.map_unordered(square_or_fail, items))
    finally:
        executor.close()


def test_sync_executor_keeps_going_after_a_bad_item():
    out = _collect(SyncExecutor(), [1, 2, 3, 4])
    assert out[0] == 1 and out[1] == 4 and out[3] == 16
    assert isinstance(out[2], ValueError) and "bad item 3" in str(out[2])


def test_process_executor_matches_sync():
    items = list(range(8))
    sync = _collect(SyncExecutor(), items)
    proc = _collect(ProcessExecutor(2), items)
    assert {k: v for k, v in sync.items() if not isinstance(v, Exception)} == {
        k: v for k, v in proc.items() if not isinstance(v, Exception)
    }
    assert isinstance(proc[3], ValueError)


def test_make_executor_jobs_one_is_synchronous_and_bad_kind_is_a_config_error():
    assert isinstance(make_executor("process", 1), SyncExecutor)
    with pytest.raises(ConfigError, match="unknown executor"):
        make_executor("threads", 2)


@pytest.mark.ray
def test_ray_executor_matches_sync_on_a_local_instance():
    ray = pytest.importorskip("ray")
    import sys

    # Workers import stage functions by module; this test module is not importable there.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    items = list(range(6))
    ray_out = _collect(make_executor("ray", 2), items)
    assert ray_out[5] == 25 and ray_out[0] == 0
    assert isinstance(ray_out[3], BaseException) and "bad item 3" in str(ray_out[3])
