"""Independent check of generated tasks on a real PyPI package, without taskforge's runner.

For ``inflection==0.5.1``: generate tasks with taskforge, then take the *original sdist* straight from
PyPI (``pip download``), and in a fresh virtualenv with plain pytest: ``git apply setup_patch`` ->
every PASS_TO_PASS test passes; ``git apply test_patch`` -> every FAIL_TO_PASS test fails; ``git apply
patch`` -> everything passes.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from taskforge.core.settings import Settings
from taskforge.dataset.reader import Dataset
from taskforge.pipeline.executors import SyncExecutor
from taskforge.pipeline.generate import GenerateOptions, generate

PACKAGE, VERSION = "inflection", "0.5.1"


def _run(argv: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _pytest(python: Path, cwd: Path, nodeids: tuple[str, ...]) -> dict[str, str]:
    """Outcome per node id of a plain ``python -m pytest -rA NODEIDS``, read from its summary lines."""
    res = _run([str(python), "-m", "pytest", "-q", "-rA", "--color=no", "-p", "no:cacheprovider", *nodeids], cwd)
    outcomes: dict[str, str] = {}
    sub_failed: set[str] = set()
    for line in res.stdout.splitlines():
        if line.startswith("SUBFAILED"):  # pytest >= 9: a failing subTest; the test itself still says PASSED
            m = re.search(r"\) (\S*::.*?)(?: - |$)", line)
            if m:
                sub_failed.add(m.group(1).strip())
            continue
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "XFAIL", "XPASS", "SKIPPED") and "::" in rest:
            nodeid = rest.split(" - ", 1)[0].strip() if word in ("FAILED", "ERROR") else rest.strip()
            outcomes[nodeid] = "passed" if word in ("PASSED", "XFAIL") else word.lower()
    return {**outcomes, **dict.fromkeys(sub_failed & set(outcomes), "failed")}


def _apply(tree: Path, patch: str, what: str) -> None:
    res = subprocess.run(["git", "apply", "-"], input=patch, cwd=tree, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"{what}: {res.stderr}"


def reverify_plainly(task, archive: Path, python: Path, tmp_path: Path, top: str = f"{PACKAGE}-{VERSION}") -> None:
    """The task holds with plain tools: sdist + ``git apply`` + ``pytest``: P2P green on the broken tree,
    F2P red once the tests are back, everything green with the gold patch. ``top``: the sdist's folder."""
    ws = tmp_path / task.instance_id
    ws.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(ws, filter="data")
    tree = ws / top
    _apply(tree, task.setup_patch, f"setup_patch of {task.instance_id}")
    p2p = _pytest(python, tree, task.pass_to_pass)
    assert {n: p2p.get(n, "missing") for n in task.pass_to_pass} == dict.fromkeys(task.pass_to_pass, "passed")
    _apply(tree, task.test_patch, f"test_patch of {task.instance_id}")
    f2p = _pytest(python, tree, task.fail_to_pass)
    assert all(f2p.get(n, "missing") != "passed" for n in task.fail_to_pass), task.instance_id
    _apply(tree, task.patch, f"patch of {task.instance_id}")
    both = (*task.fail_to_pass, *task.pass_to_pass)
    green = _pytest(python, tree, both)
    assert {n: green.get(n, "missing") for n in both} == dict.fromkeys(both, "passed")


@pytest.fixture(scope="module")
def sdist_and_venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("plain")
    dl = _run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-d", str(root),
               f"{PACKAGE}=={VERSION}"], root)
    assert dl.returncode == 0, dl.stdout + dl.stderr
    archive = next(root.glob(f"{PACKAGE}-{VERSION}.tar.gz"))
    venv = root / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)], root).returncode == 0
    pip = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "pytest"], root)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return archive, venv / "bin" / "python"


@pytest.mark.slow
@pytest.mark.realrepo
def test_generated_tasks_hold_under_plain_git_apply_and_plain_pytest(tmp_path, sdist_and_venv):
    archive, python = sdist_and_venv
    out = tmp_path / "out"
    summaries = generate([f"pypi:{PACKAGE}=={VERSION}"], out, Settings.load(), GenerateOptions(max_tasks=2),
                         SyncExecutor())
    assert not summaries[0].error and summaries[0].tasks == 2
    for task in Dataset.open(out).tasks():
        reverify_plainly(task, archive, python, tmp_path)
