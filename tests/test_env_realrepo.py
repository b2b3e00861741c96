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


def test_pluggy_is_refused_with_one_line_not_zero_tasks(tmp_path: Path,
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    """pluggy 1.7.0 once ended "exit 0, 0 tasks from 232 candidates, no warning": pytest imports it."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    work = tmp_path_factory.getbasetemp() / "tf-shared-work"
    work.mkdir(exist_ok=True)
    res = subprocess.run([sys.executable, "-c", "from taskforge.cli import main; main()", "generate",
                          "pypi:pluggy==1.7.0", "--out", str(tmp_path / "out"), "--work-dir", str(work),
                          "--max-tasks", "2", "--runs", "1"], cwd=root, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(root)})
    assert res.returncode == 1, res.stdout + res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, res.stderr
    assert "part of the test runner itself (pytest -> pluggy)" in errors[0]
    assert "Traceback" not in res.stdout + res.stderr


def test_cattrs_extras_its_test_files_import_at_their_top_are_all_installed(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """cattrs 26.2.1: tests/test_preconf.py imports bson (pymongo) and, through cattrs.preconf.*, ujson,
    msgpack... at its top; with at most 3 extras picked, one was missing and the whole file failed to
    collect. natsort 8.4.0's `icu` extra (PyICU, built against the system's ICU) is read from setup.py's
    literals and left out as an accelerator, with a note naming it."""
    from generators.env_detect import detect_env
    from generators.sources import resolve_source

    work = tmp_path_factory.getbasetemp() / "tf-shared-work"
    work.mkdir(exist_ok=True)
    cattrs = detect_env(Path(resolve_source("pypi:cattrs==26.2.1", work).path))
    extras = set(cattrs.install_target.removeprefix(".[").removesuffix("]").split(","))
    assert {"bson", "ujson", "msgpack", "pyyaml", "tomlkit", "msgspec"} <= extras, cattrs.install_target
    natsort = detect_env(Path(resolve_source("pypi:natsort==8.4.0", work).path))
    assert natsort.install_target == ".", natsort.install_target
    assert any("'icu', provided by extras ['icu'], not installed" in n for n in natsort.notes), natsort.notes
