"""``generate`` and ``validate`` give the same tasks and verdicts on the docker sandbox as on the local one.

Issue 5's "done when", on two real PyPI packages at a small scale: ``taskforge generate`` with
``--sandbox local`` and with ``--sandbox docker`` (stub strategy, two tasks; the datasets come from
``tests/generated_datasets.py`` and are shared with the red-team suite) must accept the same candidates
with the same task content (instance ids are hashes of the patches), reject the others for the same
reasons, and record a passing leak audit over the backend's channels; ``taskforge validate`` must give
the same verdict for every task on both backends.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from generated_datasets import ROOT, GeneratedDataset, cli, generated_dataset

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.realrepo]

# package -> tasks to generate. parse's third task (stub of date_convert) shares a line with the stdlib's
# datetime.py: the image audit must leave the base image's layers out, as the local one never searches
# the system interpreter, or docker rejects what local accepts.
PACKAGES = {"inflection==0.5.1": 2, "parse==1.22.4": 3}
SAME = ("instance_id", "setup_patch", "patch", "test_patch", "fail_to_pass", "pass_to_pass", "entities",
        "strategy", "problem_statement", "difficulty")
# "interpreter": the standard library the runs import (copies of PyPI projects that cannot be hidden)
CHANNELS = {"local": ("workspace", "git", "environment", "interpreter"),
            "docker": ("workspace", "git", "interpreter", "image")}


@pytest.fixture(scope="module", params=sorted(PACKAGES))
def datasets(request: pytest.FixtureRequest) -> dict[str, GeneratedDataset]:
    from taskforge.core.settings import Settings
    from tests._docker_env import require_base_image, require_docker

    require_base_image(require_docker(), Settings.load().base_image)
    return {backend: generated_dataset(request.param, sandbox=backend, max_tasks=PACKAGES[request.param])
            for backend in ("local", "docker")}


def _verdicts(ds: GeneratedDataset) -> dict[str, str]:
    """Every validated candidate's verdict, from the run's journal: ACCEPTED or the rejection reason."""
    out = {}
    for path in (ds.path / ".journal").rglob("*.json"):
        rec = json.loads(path.read_text())
        out[path.name] = rec["rejected"]["reason"] if rec.get("rejected") else "ACCEPTED"
    return out


def test_generate_accepts_the_same_tasks_on_both_backends(datasets: dict[str, GeneratedDataset]) -> None:
    local, docker = ({t.instance_id: t for t in datasets[b].tasks()} for b in ("local", "docker"))
    assert len(local) == PACKAGES[datasets["local"].package] and sorted(local) == sorted(docker)
    for iid, task in local.items():
        for name in SAME:
            assert getattr(task, name) == getattr(docker[iid], name), f"{iid}: {name} differs"
    assert _verdicts(datasets["local"]) == _verdicts(datasets["docker"])
    summaries = [datasets[b].summary["sources"][0] for b in ("local", "docker")]
    assert [(s["candidates"], s["accepted"], s["funnel"]) for s in summaries][0] == \
        [(s["candidates"], s["accepted"], s["funnel"]) for s in summaries][1]


def test_every_task_carries_a_passing_audit_of_its_backend(datasets: dict[str, GeneratedDataset]) -> None:
    for backend, ds in datasets.items():
        for task in ds.tasks():
            assert task.audit.passed and not task.audit.hits, (backend, task.instance_id, task.audit)
            assert task.audit.channels == CHANNELS[backend], (backend, task.audit.channels)
            assert task.audit.fingerprints > 0
            if backend == "docker":
                assert task.image_name.startswith("taskforge-env:"), task.image_name


def _cli(*args: str) -> dict[str, Any]:
    from taskforge.core.process import run_capture

    argv = [*cli(), *args, "--json"]
    rc, out = run_capture(argv, 1800, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    last = out.strip().splitlines()[-1] if out.strip() else ""
    assert last.startswith("{"), f"{argv} exited {rc}: {out[-3000:]}"
    return {"rc": rc, **json.loads(last)}


def test_validate_gives_the_same_verdicts_on_both_backends(datasets: dict[str, GeneratedDataset]) -> None:
    ds = datasets["local"]
    got = {b: _cli("validate", str(ds.path), "--sandbox", b, "--work-dir", str(ds.work_dir))
           for b in ("local", "docker")}
    for b, res in got.items():
        assert res["sandbox"] == b
        n = PACKAGES[ds.package]
        assert (res["rc"], res["tasks"], res["holding"], res["broken"]) == (0, n, n, []), res


def test_audit_cli_passes_on_both_datasets(datasets: dict[str, GeneratedDataset]) -> None:
    res = _cli("audit", str(datasets["docker"].path), "--images")
    assert (res["rc"], res["clean"], res["leaky"]) == (0, PACKAGES[datasets["docker"].package], []), res
    assert all("image" in r["channels"] for r in res["results"].values()), res
