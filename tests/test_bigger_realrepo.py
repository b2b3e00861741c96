"""A formerly rejected candidate of a real package becomes a bigger task that holds (marker ``realrepo``).

python-slugify 9.2.0: ``delete:slugify.slugify._numeric_reference`` was rejected (``import_broken``: the
delete cascade took ``_decode_entities``, ``_modern_slugify`` and ``slugify()`` with it, and
``slugify/__main__.py``, invisible to the index, kept importing ``slugify``, so
``tests/test_cli_interrupt.py`` stopped collecting). Now ``__main__.py`` is indexed, and the user that
cannot go (``_decode_entities``, used by ``_modern_slugify``) is stubbed: the task deletes
``_numeric_reference`` and stubs ``_decode_entities``, hides the tests of both, and holds under plain
``git apply`` + ``pytest`` on the PyPI sdist.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_generate_realrepo import reverify_plainly

from generators.candidates import propose
from generators.registry import all_strategies
from sandboxes.selection import make_sandbox
from taskforge.core.settings import Settings
from taskforge.profile.build import build_profile
from taskforge.validate.steps import CandidateJob, validate_candidate

pytestmark = [pytest.mark.realrepo, pytest.mark.slow]
SOURCE, TOP = "pypi:python-slugify==9.2.0", "python_slugify-9.2.0"
CANDIDATE = "delete:slugify.slugify._numeric_reference"


def _settings() -> Settings:
    return Settings.load({"work_dir": str(Settings.load().work_dir)})


@pytest.fixture(scope="module")
def slugify(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path, Path, Path]:
    tmp = tmp_path_factory.mktemp("slugify")
    settings = _settings()
    profile = build_profile(SOURCE, settings, make_sandbox(settings), runs=2)
    profile.save(tmp / "profile")
    dl = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                         "-d", str(tmp), "python-slugify==9.2.0"], capture_output=True, text=True, timeout=300)
    assert dl.returncode == 0, dl.stderr[-500:]
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "pytest", "text-unidecode"],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-500:]
    return profile, tmp / "profile", next(tmp.glob(f"{TOP}.tar.gz")), venv / "bin" / "python"


def test_a_formerly_rejected_delete_becomes_a_bigger_task_that_holds(slugify, tmp_path: Path) -> None:
    profile, pdir, archive, python = slugify
    cands, _ = propose(profile, list(all_strategies().values()))
    cand = next(c for c in cands if c.candidate_id == CANDIDATE)
    res = validate_candidate(CandidateJob(str(pdir), cand, _settings().to_dict()))
    assert res.rejected is None, res.outcome
    task = res.outcome.task
    assert task.provenance["stubbed_dependents"] == ["slugify.slugify._decode_entities"]
    assert "slugify.slugify._decode_entities" in task.entities and "+_decode_entities-" in task.instance_id
    assert "`slugify.slugify._decode_entities`" in task.problem_statement
    assert "raise NotImplementedError" in task.setup_patch
    reverify_plainly(task, archive, python, tmp_path, top=TOP)
