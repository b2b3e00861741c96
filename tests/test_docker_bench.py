"""``taskforge bench docker-overhead`` measures what issue 5 asks: per-run overhead over raw test time."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskforge.bench.docker_overhead import measure
from taskforge.core.settings import Settings
from tests._docker_env import require_base_image, require_docker

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_overhead_is_wall_minus_pytest_time_and_phases_add_up(tmp_path: Path) -> None:
    settings = Settings.load({"work_dir": str(tmp_path / "work")})
    require_base_image(require_docker(), settings.base_image)
    s = measure(3, settings)
    timings = s["timings"]
    assert len(timings) == 3 and s["image"].startswith("taskforge-env:")
    for t in timings:
        phases = t["create"] + t["copy"] + t["execute"] + t["remove"]
        assert abs(phases - t["wall"]) < 0.05, t  # the phases are the whole run
        assert 0 < t["test_time"] < t["wall"], t  # the runner's pytest session runs inside the wall time
    assert s["p50_overhead_s"] == pytest.approx(sorted(t["wall"] - t["test_time"] for t in timings)[1], abs=1e-3)
    assert s["p50_local_wall_s"] > 0 and s["p50_over_local_s"] is not None
    assert s["load_avg_1m"] >= 0 and s["cpus"] >= 1
