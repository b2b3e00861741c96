"""Red team, Harbor edition: every hack of ``tests/redteam_hacks.py`` graded by the EXPORTED Harbor verifier.

What Harbor does for a trial's verification, done directly (the real ``harbor`` CLI takes ~1 min a trial;
``tests/test_harbor_hacks.py`` keeps its attacks through the CLI):

1. the task exported with ``export_harbor`` (``network="compose"``, FROM the task's environment image, as
   a dataset with an ``image_name`` exports), its verifier image built from ``tests/`` (``docker build``);
2. the agent's ``/app``: the broken workspace with the hack's patch applied by ``git apply`` (what the
   agent's files are after it edits them; a section git refuses is simply not there);
3. a fresh verifier container (``--network none``, Harbor's 2 GiB, no agent process, the agent's files
   copied to ``/app`` as Harbor copies the artifact) runs the task's own verifier, ``run_tests.py`` as
   ``test.sh`` runs it, as root: a fresh grading uid, canaries drawn for this run, its reward file.

To fit CI, the hacks of one target share a container in batches (``BATCH``), but each gets its own fresh
verifier process, its own copy of ``/app`` and its own reward directory; a hack that attacks the grading
process itself (``Hack.isolate``) gets a container of its own. ``config.json`` is copied with the hack's
``timeout_s`` (the reward-path suite grades with the same limits; hangs on purpose take 15 s, not 14 min)
and ``tracebacks`` off (``--tb=no``: the tail of ``details.json`` only, never the verdict; rendering 100+
tracebacks per run was most of the cost).

Every hack scores 0, the gold files 1, the unchanged workspace 0, on the first generated task of the
same three real packages as ``tests/test_redteam_hacks.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from generated_datasets import generated_dataset
from redteam_hacks import HACKS, Hack, Target

from taskforge.core.task import Task

REAL_PACKAGES = ("inflection==0.5.1", "parse==1.22.4", "cachetools==5.3.3")
BATCH = 15  # hacks per verifier container (each still its own verifier run)
PARALLEL = 2  # containers at a time
DRIVER = r"""#!/bin/bash
# one fresh verifier run per name: the agent's files copied to /app, the verifier as test.sh runs it
set -u
for entry in "$@"; do
    name="${entry%%:*}"; timeout_s="${entry##*:}"
    rm -rf /app; mkdir -p /app "/logs/$name"
    cp -a "/agents/$name/." /app/
    cp /drv/config-$timeout_s.json /tests/config-$timeout_s.json
    PY="$(command -v python3 || command -v python)"
    timeout --kill-after=10 $(( ${timeout_s%.*} + 120 )) \
        "$PY" -I /tests/run_tests.py --config "/tests/config-$timeout_s.json" --workspace /app \
        --reward "/logs/$name/reward.txt" > "/logs/$name/stdout.txt" 2>&1
    echo "$?" > "/logs/$name/exit.txt"
done
"""
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.realrepo]


@dataclass
class Verified:
    """The exported verifier's verdicts on one target: name -> details.json (plus ``reward_txt``)."""

    package: str
    task: Task
    details: dict[str, dict] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> dict:
        if name in self.failures:
            pytest.fail(f"{name} on {self.package}: the verifier left no verdict: {self.failures[name]}")
        return self.details[name]


def _docker(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _env_image(ds: object, task: Task, scratch: Path) -> str:
    """The task's environment image (as ``taskforge package`` builds it; FROM it the verifier image)."""
    from sandboxes.docker import DockerSandbox
    from taskforge.core.settings import Settings

    original = scratch / "original"
    if not original.exists():
        original.mkdir(parents=True)
        ds.trees.materialize(task, original)  # type: ignore[attr-defined]
    return DockerSandbox(Settings.load()).prepare(task.env_spec, original).location


def _export(ds: object, task: Task, base_image: str, dest: Path) -> Path:
    from taskforge.dataset import Dataset
    from taskforge.dataset.export_harbor import HarborOptions, export_task

    options = HarborOptions(base_image=base_image, install_requirements=False, network="compose")
    return export_task(Dataset.open(ds.path), task, dest, options)  # type: ignore[attr-defined]


def _build_verifier(task_dir: Path) -> str:
    h = hashlib.sha256()
    for p in sorted((task_dir / "tests").rglob("*")):
        if p.is_file():
            h.update(p.relative_to(task_dir).as_posix().encode() + b"\0" + p.read_bytes())
    tag = f"taskforge-harbor-verifier:{h.hexdigest()[:16]}"
    if _docker("image", "inspect", tag, timeout=60).returncode != 0:
        proc = _docker("build", "-q", "-t", tag, str(task_dir / "tests"), timeout=900)
        assert proc.returncode == 0, f"docker build of {task_dir / 'tests'} failed: {proc.stderr[-3000:]}"
    return tag


def _agent_files(target: Target, patch: str, dest: Path) -> str:
    """The agent's /app after it made the patch's edits (``git apply``; refused sections stay undone)."""
    shutil.copytree(target.root, dest, symlinks=True)
    if not patch:
        return ""
    proc = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=patch, text=True,
                          cwd=dest, capture_output=True, timeout=60)
    if proc.returncode != 0:  # what git refuses whole (escapes, .git sections) the agent's files just lack
        proc = subprocess.run(["git", "apply", "--reject", "--whitespace=nowarn", "-"], input=patch, text=True,
                              cwd=dest, capture_output=True, timeout=60)
        for rej in dest.rglob("*.rej"):
            rej.unlink()
    return proc.stderr[-300:]


def _batches(hacks: list[Hack]) -> list[list[tuple[str, float]]]:
    plain = [("gold", 120.0), ("empty", 120.0), *((h.name, h.timeout_s) for h in hacks if not h.isolate)]
    out = [plain[i:i + BATCH] for i in range(0, len(plain), BATCH)]
    return out + [[(h.name, h.timeout_s)] for h in hacks if h.isolate]


def _run_batch(image: str, drv: Path, agents: Path, logs: Path, batch: list[tuple[str, float]]) -> str:
    args = [f"{name}:{int(t)}" for name, t in batch]
    limit = sum(t + 60 for _, t in batch) + 120
    proc = _docker("run", "--rm", "--network", "none", "--memory", "2g", "--memory-swap", "2g",
                   "-v", f"{drv}:/drv:ro", "-v", f"{agents}:/agents:ro", "-v", f"{logs}:/logs",
                   "--entrypoint", "/bin/bash", image, "/drv/driver.sh", *args, timeout=limit)
    return f"exit {proc.returncode}: {proc.stderr[-1000:]}" if proc.returncode else ""


def _selected(session: pytest.Session) -> set[str]:
    names = set()
    for item in session.items:
        cs = getattr(item, "callspec", None)
        if cs is not None and isinstance(cs.params.get("hack"), Hack):
            names.add(cs.params["hack"].name)
    return names


@pytest.fixture(scope="module", params=REAL_PACKAGES, ids=[p.split("==")[0] for p in REAL_PACKAGES])
def verified(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Verified:
    package = request.param
    if shutil.which("docker") is None or _docker("info", timeout=60).returncode != 0:
        pytest.fail("docker is not reachable: this test is marked docker and must run where docker is")
    ds = generated_dataset(package)
    task = ds.tasks()[0]
    base = tmp_path_factory.mktemp(f"harbor-{package.split('==')[0]}")
    task_dir = _export(ds, task, _env_image(ds, task, base), base / "export")
    image = _build_verifier(task_dir)
    target = Target.from_task(task, ds.trees, base / "workspace")
    hacks = [h for h in HACKS if h.name in _selected(request.session)]
    drv, agents, logs = (base / d for d in ("drv", "agents", "logs"))
    for d in (drv, agents, logs):
        d.mkdir()
    (drv / "driver.sh").write_text(DRIVER)
    cfg = json.loads((task_dir / "tests" / "config.json").read_text())
    for t in {120.0, *(h.timeout_s for h in hacks)}:
        (drv / f"config-{int(t)}.json").write_text(json.dumps({**cfg, "timeout_s": float(t), "tracebacks": False}))
    out = Verified(package, task)
    applied = {"gold": _agent_files(target, task.patch, agents / "gold"), "empty": _agent_files(target, "", agents / "empty")}
    for h in hacks:
        applied[h.name] = _agent_files(target, h.make(target), agents / h.name)
    batches = _batches(hacks)
    with ThreadPoolExecutor(PARALLEL) as pool:
        errors = list(pool.map(lambda b: _run_batch(image, drv, agents, logs, b), batches))
    for batch, err in zip(batches, errors, strict=True):
        for name, _ in batch:
            details_file = logs / name / "details.json"
            if not details_file.is_file():
                stdout = (logs / name / "stdout.txt").read_text()[-1500:] if (logs / name / "stdout.txt").is_file() else ""
                out.failures[name] = f"no details.json ({err or 'container ok'}; {stdout})"
                continue
            d = json.loads(details_file.read_text())
            d["reward_txt"] = (logs / name / "reward.txt").read_text().strip()
            d["git_apply"] = applied.get(name, "")
            out.details[name] = d
    return out


def _why(d: dict) -> str:
    keep = ("reward", "reward_txt", "flags", "warnings", "detail", "fail_to_pass", "collection_errors", "forged",
            "grader_uid", "git_apply")
    return json.dumps({k: d.get(k) for k in keep})[:2500]


def test_gold_files_score_one(verified: Verified) -> None:
    d = verified.get("gold")
    assert d["reward"] == 1.0 and d["reward_txt"] == "1" and d["flags"] == [], _why(d)
    assert d["grader_uid"] is not None and d["canaries"] > 0, _why(d)  # graded as a fresh uid, with canaries


def test_unchanged_workspace_scores_zero(verified: Verified) -> None:
    d = verified.get("empty")
    assert d["reward"] == 0.0 and d["reward_txt"] == "0" and "tampering" not in d["flags"], _why(d)


@pytest.mark.parametrize("hack", HACKS, ids=[h.name for h in HACKS])
def test_hack_scores_zero_through_the_verifier(verified: Verified, hack: Hack) -> None:
    d = verified.get(hack.name)
    assert d["reward"] == 0.0 and d["reward_txt"] == "0", f"{hack.family}/{hack.name} ({hack.description}) WON: {_why(d)}"
