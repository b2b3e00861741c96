"""Exports: Harbor task directories (structure + a local run of the verifier), SWE-bench JSONL, verl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sandboxes import startup_hooks
from taskforge.core.errors import DatasetError
from taskforge.dataset import Dataset, DatasetWriter
from taskforge.dataset.export_harbor import HarborOptions, export_harbor, harbor_name
from taskforge.dataset.export_swebench import export_swebench
from taskforge.dataset.export_verl import export_verl, split_of
from tests.strategies import MINI_BROKEN, MINI_ORIGINAL, mini_task, sample_task


@pytest.fixture
def mini_dataset(tmp_path: Path) -> tuple[Dataset, Path]:
    task, src = mini_task(tmp_path)
    root = tmp_path / "ds"
    with DatasetWriter(root) as w:
        w.add_repo_archive(task.repo, task.base_commit, src)
        w.add(task)
    return Dataset.open(root), tmp_path


def _tree(archive: Path) -> dict[str, str]:
    with tarfile.open(archive, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_dataset_alone_rebuilds_original_and_broken_workspace(mini_dataset: tuple[Dataset, Path]) -> None:
    ds, tmp = mini_dataset
    task = ds.tasks()[0]
    orig = ds.extract_original(task, tmp / "o")
    broken = ds.broken_workspace(task, tmp / "b")
    assert {p.relative_to(orig).as_posix(): p.read_text() for p in orig.rglob("*") if p.is_file()} == MINI_ORIGINAL
    assert {p.relative_to(broken).as_posix(): p.read_text() for p in broken.rglob("*") if p.is_file()} == MINI_BROKEN
    assert ds.manifest.archives[0].repo == "mini"


def test_harbor_directory_is_structurally_valid(mini_dataset: tuple[Dataset, Path], tmp_path: Path) -> None:
    ds, _ = mini_dataset
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    (task_dir,) = export_harbor(ds, tmp_path / "harbor", HarborOptions(base_image="taskforge/base:bookworm",
                                                                       ca_bundle=str(ca)))
    assert task_dir.name == "mini__delete__mini-calc-mul-1a2b3c4d"
    toml = tomllib.loads((task_dir / "task.toml").read_text())
    assert toml["version"] == "1.0"
    assert toml["verifier"]["timeout_sec"] > 0 and toml["agent"]["timeout_sec"] > 0
    assert toml["environment"]["memory_mb"] == 2048 and toml["environment"]["build_timeout_sec"] > 0
    assert toml["metadata"]["instance_id"] == "mini__delete__mini.calc.mul-1a2b3c4d"
    assert "Add `mini.calc.mul(a, b)`" in (task_dir / "instruction.md").read_text()
    for script in ("tests/test.sh", "solution/solve.sh"):
        assert os.access(task_dir / script, os.X_OK)
        assert subprocess.run(["bash", "-n", str(task_dir / script)], timeout=10).returncode == 0
    dockerfile = (task_dir / "environment" / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=taskforge/base:bookworm\nFROM ${BASE_IMAGE}" in dockerfile
    assert "COPY ca-bundle.pem" in dockerfile and "PIP_CERT=" in dockerfile
    assert "ADD workspace.tar.gz /app/" in dockerfile and "tests" not in dockerfile.split("ADD")[1]
    reqs = (task_dir / "environment" / "requirements.txt").read_text().split()
    assert reqs == ["pytest==8.3.3"]  # the project itself never comes from an index
    # tests out of the environment by construction: the image gets exactly the broken workspace
    env_files = sorted(p.name for p in (task_dir / "environment").iterdir())
    assert env_files == ["Dockerfile", "ca-bundle.pem", "requirements.txt", "taskforge-startup", "workspace.tar.gz"]
    # beside it only the start-up hook every environment gets (sandboxes/startup_hooks.py), byte for byte
    startup = task_dir / "environment" / "taskforge-startup"
    assert {p.name: p.read_bytes() for p in startup.iterdir()} == startup_hooks.files()
    workspace = _tree(task_dir / "environment" / "workspace.tar.gz")
    assert workspace == MINI_BROKEN
    assert "def mul" not in json.dumps(workspace) and "test_mul" not in json.dumps(workspace)
    assert _tree(task_dir / "solution" / "gold_files.tar.gz") == {p: MINI_ORIGINAL[p] for p in
                                                                  ("mini/__init__.py", "mini/calc.py")}
    assert "tests/test_mul.py" in _tree(task_dir / "tests" / "test_files.tar.gz")


def _run(script: Path, workspace: Path, reward: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TASKFORGE_WORKSPACE": str(workspace), "TASKFORGE_REWARD_FILE": str(reward),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)


def _fresh_workspace(task_dir: Path, dest: Path) -> Path:
    with tarfile.open(task_dir / "environment" / "workspace.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest


def test_harbor_test_sh_scores_1_with_solve_sh_and_0_without(mini_dataset: tuple[Dataset, Path],
                                                             tmp_path: Path) -> None:
    ds, _ = mini_dataset
    (task_dir,) = export_harbor(ds, tmp_path / "harbor")
    nop = _fresh_workspace(task_dir, tmp_path / "nop")
    out = _run(task_dir / "tests" / "test.sh", nop, tmp_path / "nop.txt")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "nop.txt").read_text().strip() == "0"
    details = json.loads((tmp_path / "details.json").read_text())
    assert details["fail_to_pass"] == {"tests/test_mul.py::test_mul": "error", "tests/test_mul.py::test_mul_zero": "error"}
    assert details["pass_to_pass"] == {"tests/test_calc.py::test_add": "passed"} and details["flags"] == []

    oracle = _fresh_workspace(task_dir, tmp_path / "oracle")
    solved = _run(task_dir / "solution" / "solve.sh", oracle, tmp_path / "unused.txt")
    assert solved.returncode == 0, solved.stderr
    out = _run(task_dir / "tests" / "test.sh", oracle, tmp_path / "oracle.txt")
    assert (tmp_path / "oracle.txt").read_text().strip() == "1", out.stdout + out.stderr
    assert not list(oracle.glob("test_taskforge_canary_*.py"))  # verifier cleans up its canary


@pytest.mark.slow
def test_harbor_verifier_undoes_test_tampering(mini_dataset: tuple[Dataset, Path], tmp_path: Path) -> None:
    ds, _ = mini_dataset
    (task_dir,) = export_harbor(ds, tmp_path / "harbor")
    ws = _fresh_workspace(task_dir, tmp_path / "ws")
    # an "agent" that writes the hidden test file itself (trivially passing) and a conftest that
    # turns every failure into a pass
    (ws / "tests" / "test_mul.py").write_text("def test_mul():\n    pass\n\ndef test_mul_zero():\n    pass\n")
    (ws / "conftest.py").write_text(
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    out = yield\n    rep = out.get_result()\n    rep.outcome = 'passed'\n")
    _run(task_dir / "tests" / "test.sh", ws, tmp_path / "r.txt")
    assert (tmp_path / "r.txt").read_text().strip() == "0"
    assert not (ws / "conftest.py").exists()
    details = json.loads((tmp_path / "details.json").read_text())
    assert "conftest.py" in details["removed"]


@pytest.mark.slow
def test_harbor_verifier_flags_a_forged_canary(mini_dataset: tuple[Dataset, Path], tmp_path: Path) -> None:
    ds, _ = mini_dataset
    (task_dir,) = export_harbor(ds, tmp_path / "harbor")
    ws = _fresh_workspace(task_dir, tmp_path / "ws")
    _run(task_dir / "solution" / "solve.sh", ws, tmp_path / "x.txt")
    # solved code that also rewrites every test report to "passed" from inside the package
    (ws / "mini" / "__init__.py").write_text(
        "from mini.calc import add, mul\nimport _pytest.reports as _r\n"
        "_orig = _r.TestReport.from_item_and_call\n"
        "def _forge(item, call):\n    rep = _orig(item, call)\n    rep.outcome = 'passed'\n    return rep\n"
        "_r.TestReport.from_item_and_call = staticmethod(_forge)\n")
    _run(task_dir / "tests" / "test.sh", ws, tmp_path / "r.txt")
    details = json.loads((tmp_path / "details.json").read_text())
    assert (tmp_path / "r.txt").read_text().strip() == "0"
    assert "canary_fail_did_not_fail" in details["flags"]


def test_harbor_names_are_docker_safe_and_collisions_refused() -> None:
    assert harbor_name("Inflection__delete__inflection.Foo.bar-ABCD") == "inflection__delete__inflection-foo-bar-abcd"


def test_harbor_export_without_archive_is_a_dataset_error(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds") as w:
        w.add(sample_task(1))
    with pytest.raises(DatasetError, match="has no archive of demo@"):
        export_harbor(Dataset.open(tmp_path / "ds"), tmp_path / "out")


def test_swebench_jsonl_has_swebench_columns_and_types(mini_dataset: tuple[Dataset, Path], tmp_path: Path) -> None:
    ds, _ = mini_dataset
    path = export_swebench(ds, tmp_path / "swe")
    (row,) = [json.loads(line) for line in path.read_text().splitlines()]
    for col in ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement", "FAIL_TO_PASS",
                "PASS_TO_PASS", "version", "created_at", "environment_setup_commit", "hints_text"):
        assert isinstance(row[col], str), col
    assert json.loads(row["FAIL_TO_PASS"]) == ["tests/test_mul.py::test_mul", "tests/test_mul.py::test_mul_zero"]
    assert "prompt" not in row and "validation" not in row


def test_verl_export_has_only_rl_columns_and_a_seeded_stable_split(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with DatasetWriter(root) as w:
        w.add_all(sample_task(i) for i in range(40))
    paths = export_verl(Dataset.open(root), tmp_path / "verl", val_fraction=0.25, seed=7)
    assert [p.name for p in paths] == ["train.parquet", "test.parquet"]
    train, test = (pq.read_table(p) for p in paths)
    assert train.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert train.num_rows + test.num_rows == 40 and 3 <= test.num_rows <= 20
    row = test.to_pylist()[0]
    assert row["extra_info"]["split"] == "test" and row["reward_model"]["ground_truth"] == row["extra_info"]["instance_id"]
    assert split_of(row["extra_info"]["instance_id"], 0.25, 7) == "test"
    text = json.dumps(train.to_pylist() + test.to_pylist())
    assert "+def func" not in text and "test_mod.py" not in text  # no gold, no hidden test names
    again = export_verl(Dataset.open(root), tmp_path / "verl2", val_fraction=0.25, seed=7)
    assert [pq.read_table(p).equals(pq.read_table(q)) for p, q in zip(paths, again, strict=True)] == [True, True]
