"""``baseline_more_runs_max_s``: a suite whose coverage run is long gets no second baseline run.

Coverage costs 4x on a pure-Python suite (more-itertools 11.2.1: 40 s plain, 164 s with coverage); the
second run bought a third observation of each test that the grading check and validation's repeated gold
gradings make anyway. The bench then takes the suite's time from the grading check, not the coverage run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from generate_fixtures import make_mini_project

from sandboxes.fakes import HostSandbox
from taskforge.bench.corpus_report import baseline_numbers
from taskforge.core.settings import Settings
from taskforge.pipeline.generate import ProfileJob, profile_source
from taskforge.profile.build import Profile


def _profile(tmp_path: Path, limit: float) -> tuple[Profile, Path]:
    src = make_mini_project(tmp_path / "minipkg")
    settings = Settings.load({"work_dir": str(tmp_path / "work"), "baseline_runs": 2,
                              "baseline_more_runs_max_s": limit})
    out = profile_source(ProfileJob(str(src), settings.to_dict(), sandbox=HostSandbox()))
    assert not out.error, out.error
    return Profile.load(Path(out.profile_dir)), Path(out.profile_dir)


@pytest.mark.slow
def test_a_long_coverage_run_is_the_only_baseline_run(tmp_path: Path) -> None:
    short, where = _profile(tmp_path / "a", 1e-6)  # every coverage run is "long"
    assert short.baseline.runs == 1 and short.timings.get("runs_skipped") == 1
    assert "run_2" not in short.timings and short.baseline.grading_check is not None
    assert short.baseline.grading_check.status == "passed" and short.baseline.reliable
    assert baseline_numbers(where)["suite_s"] == pytest.approx(short.baseline.grading_check.seconds, abs=1e-3)
    both, _ = _profile(tmp_path / "b", 0.0)  # 0: never skip
    assert both.baseline.runs == 2 and "run_2" in both.timings and "runs_skipped" not in both.timings
    assert both.baseline.reliable == short.baseline.reliable


def test_the_bench_takes_a_lone_coverage_runs_suite_time_from_the_grading_check(tmp_path: Path) -> None:
    check = {"status": "passed", "graded": 3, "seconds": 2.5}
    (tmp_path / "baseline.json").write_text(json.dumps({"run_seconds": [9.0], "passed": ["a", "b", "c"],
                                                        "grading_check": check}))
    assert baseline_numbers(tmp_path)["suite_s"] == 2.5
    (tmp_path / "baseline.json").write_text(json.dumps({"run_seconds": [9.0, 2.0], "passed": ["a"],
                                                        "grading_check": check}))
    assert baseline_numbers(tmp_path)["suite_s"] == 2.0
