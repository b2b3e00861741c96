"""Environment detection and installation on real PyPI packages that broke it (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.realrepo, pytest.mark.slow]


def test_jinja2_picks_one_lock_builds_and_profiles(tmp_path_factory: pytest.TempPathFactory) -> None:
    """jinja2 3.1.6: tests.txt (3.13 lock) + tests37.txt (3.7 lock) once gave ResolutionImpossible."""
    from sandboxes.local import LocalSandbox
    from taskforge.core.settings import Settings
    from taskforge.profile.build import build_profile

    work = tmp_path_factory.getbasetemp() / "tf-shared-work"
    work.mkdir(exist_ok=True)
    settings = Settings(work_dir=work, install_timeout_s=600, test_timeout_s=300)
    profile = build_profile("pypi:jinja2==3.1.6", settings, LocalSandbox(settings), runs=1)
    spec = profile.spec
    assert "pytest==8.3.4" in spec.requirements and "pytest==7.4.4" not in spec.requirements
    assert not any("tests37" in r for r in spec.requirements)
    notes = "\n".join(spec.notes)
    assert "tox.ini [testenv] deps" in notes
    assert any(line.lower().startswith("trio==") for line in profile.env.frozen)
    assert len(profile.baseline.passed) > 500, profile.baseline  # jinja2's suite: ~850 tests
    assert not profile.baseline.collection_errors
    assert Path(profile.snapshot.path).is_dir()
