"""The per-run limit derives from the baseline's measured suite time; baseline collection errors are subtracted."""

from __future__ import annotations

from taskforge.core.settings import Settings
from taskforge.profile.baseline import Baseline
from taskforge.validate.from_baseline import new_collection_errors, run_limit_s


def _baseline(run_seconds: tuple[float, ...] = (), errors: tuple[str, ...] = ()) -> Baseline:
    return Baseline(runs=len(run_seconds) or 1, passed=frozenset({"t.py::a"}), failed=frozenset(),
                    flaky=frozenset(), skipped=frozenset(), collection_errors=errors, run_seconds=run_seconds)


def test_limit_is_k_times_the_slowest_baseline_run_plus_margin() -> None:
    s = Settings.load({"run_limit_factor": 5, "run_limit_margin_s": 60, "test_timeout_s": 900})
    assert run_limit_s(_baseline((12.0, 9.5, 10.0)), s) == 120.0  # markdown: a 12 s suite, not 900 s
    assert run_limit_s(_baseline((400.0,)), s) == 900.0  # never above the flat limit
    assert run_limit_s(_baseline(()), s) == 900.0  # an old profile without measured runs


def test_limit_settings_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("TASKFORGE_RUN_LIMIT_FACTOR", "2")
    monkeypatch.setenv("TASKFORGE_RUN_LIMIT_MARGIN_S", "10")
    assert run_limit_s(_baseline((3.0,)), Settings.load()) == 16.0


def test_collection_errors_of_the_baseline_are_subtracted() -> None:
    b = _baseline((1.0,), errors=("tests/test_extra.py",))
    errors = ("tests/test_extra.py", "tests/test_core.py", "tests/test_extra.py::TestX")
    assert new_collection_errors(errors, b) == ("tests/test_core.py",)
    assert new_collection_errors(("tests/test_extra.py",), b) == ()
