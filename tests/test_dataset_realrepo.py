"""A task cut by hand from a real PyPI package (inflection 0.5.1: ``dasherize`` deleted), written to a
dataset and exported to Harbor: the dataset alone rebuilds the workspace, and the exported verifier
scores 0 on the broken workspace and 1 after ``solve.sh`` (run locally, no Docker)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from taskforge.core.environment import EnvSpec
from taskforge.core.task import Task
from taskforge.dataset import Dataset, DatasetWriter
from taskforge.dataset.export_harbor import export_harbor
from tests.strategies import sample_task, unified_diff

pytestmark = [pytest.mark.realrepo, pytest.mark.slow]

DASHERIZE = '''def dasherize(word: str) -> str:
    """Replace underscores with dashes in the string.

    Example::

        >>> dasherize("puni_puni")
        'puni-puni'

    """
    return word.replace('_', '-')


'''
TEST = '''@pytest.mark.parametrize(("input", "expected"), UNDERSCORES_TO_DASHES)
def test_dasherize(input, expected):
    assert inflection.dasherize(input) == expected


'''


@pytest.fixture(scope="module")
def inflection_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return download_inflection(tmp_path_factory.mktemp("sdist"))


def download_inflection(tmp: Path) -> Path:
    dl = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                         "--no-build-isolation", "inflection==0.5.1", "-d", str(tmp)],
                        capture_output=True, text=True, timeout=300)
    if dl.returncode != 0:
        pytest.skip(f"cannot download inflection==0.5.1 from the package index: {dl.stderr.strip()[-300:]}")
    (sdist,) = tmp.glob("inflection-0.5.1.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp, filter="data")
    return tmp / "inflection-0.5.1"


def _collect(src: Path) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "test_inflection.py"], cwd=src, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(src)})
    return [ln for ln in out.stdout.splitlines() if "::" in ln]


def inflection_task(inflection_src: Path) -> Task:
    """The hand-cut task: ``inflection.dasherize`` and its parametrized test removed."""
    files = ("inflection/__init__.py", "test_inflection.py")
    original = {f: (inflection_src / f).read_text() for f in files}
    assert DASHERIZE in original[files[0]] and TEST in original[files[1]]
    broken = {files[0]: original[files[0]].replace(DASHERIZE, ""), files[1]: original[files[1]].replace(TEST, "")}
    ids = _collect(inflection_src)
    f2p = tuple(i for i in ids if "::test_dasherize[" in i)
    p2p = tuple(i for i in ids if "::test_dasherize[" not in i)
    assert len(f2p) >= 2 and len(p2p) > 100
    task = dataclasses.replace(
        sample_task(0, repo="inflection"),
        instance_id="inflection__delete__inflection.dasherize-5f1e2d3c", source="pypi:inflection==0.5.1",
        base_commit="b" * 40, version="0.5.1", entities=("inflection.dasherize",),
        setup_patch=unified_diff(original, broken), patch=unified_diff(broken, original, [files[0]]),
        test_patch=unified_diff(broken, original, [files[1]]),
        problem_statement="Add `inflection.dasherize(word)`, which replaces underscores with dashes.",
        fail_to_pass=f2p, pass_to_pass=p2p,
        env_spec=EnvSpec(project_name="inflection", python="3.11", install_target=".", package_dirs=("inflection",),
                         test_paths=("test_inflection.py",)),
        env_frozen=("pytest==8.3.3", "inflection @ file:///work/inflection"))
    return task


def test_real_package_task_exports_to_a_harbor_task_that_grades(inflection_src: Path, tmp_path: Path) -> None:
    task = inflection_task(inflection_src)
    files = ("inflection/__init__.py", "test_inflection.py")
    root = tmp_path / "ds"
    with DatasetWriter(root) as w:
        w.add_repo_archive(task.repo, task.base_commit, inflection_src)
        w.add(task)
    ds = Dataset.open(root)
    ws = ds.broken_workspace(ds.get(task.instance_id), tmp_path / "broken")
    assert "def dasherize" not in (ws / files[0]).read_text() and "test_dasherize" not in (ws / files[1]).read_text()

    (task_dir,) = export_harbor(ds, tmp_path / "harbor")
    assert (task_dir / "environment" / "requirements.txt").read_text().split() == ["pytest==8.3.3"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for agent, expected in (("nop", "0"), ("oracle", "1")):
        app = tmp_path / agent
        with tarfile.open(task_dir / "environment" / "workspace.tar.gz") as tar:
            tar.extractall(app, filter="data")
        run_env = {**env, "TASKFORGE_WORKSPACE": str(app), "TASKFORGE_REWARD_FILE": str(tmp_path / agent / "r.txt")}
        if agent == "oracle":
            solved = subprocess.run(["bash", str(task_dir / "solution" / "solve.sh")], env=run_env,
                                    capture_output=True, text=True, timeout=120)
            assert solved.returncode == 0, solved.stderr
        out = subprocess.run(["bash", str(task_dir / "tests" / "test.sh")], env=run_env, capture_output=True,
                             text=True, timeout=600)
        details = json.loads((tmp_path / agent / "details.json").read_text())
        assert (tmp_path / agent / "r.txt").read_text().strip() == expected, out.stdout + details["output_tail"]
        assert all(v == "passed" for v in details["pass_to_pass"].values())
        assert details["flags"] == []
