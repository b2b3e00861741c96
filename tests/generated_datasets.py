"""Real generated datasets for tests: ``taskforge generate`` on a PyPI package, once per key, cached.

    from generated_datasets import generated_dataset      # (or tests.generated_datasets)

    ds = generated_dataset("inflection==0.5.1", sandbox="local", strategies=("stub",), max_tasks=2)
    ds.path        # the dataset folder (manifest, shards, repos/ archives): Dataset.open(ds.path)
    ds.tasks()     # list[Task], in dataset order
    ds.trees       # DatasetTrees(ds.path): original trees for ``taskforge.reward.reward.reward``
    ds.summary     # the generate run's JSON summary (per-source candidates, funnel, seconds)

The dataset is produced by the real CLI (``taskforge generate pypi:NAME==VER --json``, a subprocess, as a
user runs it) and kept under ``<repo>/.taskforge/test-datasets/<code>/<key>/`` (git-ignored), where
``<code>`` hashes the sources of ``taskforge``, ``generators`` and ``sandboxes`` and ``<key>`` names the
package, strategies, sandbox, max tasks, seed, repeats and baseline runs. So one session generates each
dataset once, every test that asks for the same key reuses it, and a later session with the same code
reuses it too; any code change regenerates. ``TASKFORGE_TEST_DATASETS`` moves the cache root. The work
area (sdists, environments, profiles) lives next to the datasets of the same code hash, so datasets of
the same package share one environment and one profile per sandbox backend. A file lock makes
concurrent sessions (pytest-xdist) wait for one generation instead of racing.

A package that yields no task, or a failing ``generate``, fails the calling test with the CLI's output
(never a silent skip). Callers mark their tests ``slow`` + ``realrepo`` (+ ``docker`` for docker).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_CODE_DIRS = ("taskforge", "generators", "sandboxes")
GENERATE_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class GeneratedDataset:
    package: str  # "NAME==VERSION"
    sandbox: str  # the backend that generated (and validated) the tasks
    strategies: tuple[str, ...]
    max_tasks: int
    path: Path
    summary: dict[str, Any] = field(default_factory=dict)  # the ``--json`` summary of the generating run
    work_dir: Path = Path()

    @property
    def trees(self) -> Any:
        from taskforge.reward.workspace import DatasetTrees

        return DatasetTrees(self.path)

    def tasks(self) -> list[Any]:
        from taskforge.dataset import Dataset

        return Dataset.open(self.path).tasks()

    def instance_ids(self) -> list[str]:
        return sorted(t.instance_id for t in self.tasks())


def cache_root() -> Path:
    return Path(os.environ.get("TASKFORGE_TEST_DATASETS") or ROOT / ".taskforge" / "test-datasets")


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """Hash of every source file the generator runs (so a code change regenerates the datasets)."""
    h = hashlib.sha256()
    for top in _CODE_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".Dockerfile", ""):
                h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def dataset_key(package: str, sandbox: str, strategies: tuple[str, ...], max_tasks: int, seed: int,
                repeats: int, runs: int) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", package)
    return f"{name}__{'-'.join(strategies)}__{sandbox}__n{max_tasks}__s{seed}__r{repeats}__b{runs}"


@functools.cache
def generated_dataset(package: str, *, sandbox: str = "local", strategies: tuple[str, ...] = ("stub",),
                      max_tasks: int = 2, seed: int = 0, repeats: int = 2, runs: int = 3) -> GeneratedDataset:
    """The dataset ``taskforge generate pypi:<package>`` writes with these options (cached, see module doc)."""
    base = cache_root() / code_hash()
    out = base / dataset_key(package, sandbox, tuple(strategies), max_tasks, seed, repeats, runs)
    work = base / "work"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = out / "generate.json"
        if not done.is_file() or not (out / "manifest.json").is_file():
            summary = _run_generate(package, out, work, sandbox, strategies, max_tasks, seed, repeats, runs)
            tmp = done.with_name("generate.json.tmp")
            tmp.write_text(json.dumps(summary, sort_keys=True))
            os.replace(tmp, done)
        summary = json.loads(done.read_text())
    ds = GeneratedDataset(package, sandbox, tuple(strategies), max_tasks, out, summary, work)
    assert ds.tasks(), f"`taskforge generate pypi:{package}` wrote no task into {out}: {summary}"
    return ds


def cli() -> list[str]:
    """``taskforge`` of this checkout (run with ``cwd=ROOT``), whatever the environment has installed."""
    return [sys.executable, "-c", "from taskforge.cli import main; main()"]


def _run_generate(package: str, out: Path, work: Path, sandbox: str, strategies: tuple[str, ...],
                  max_tasks: int, seed: int, repeats: int, runs: int) -> dict[str, Any]:
    from taskforge.core.process import run_capture

    argv = [*cli(), "generate", f"pypi:{package}", "--out", str(out), "--max-tasks", str(max_tasks),
            "--strategies", ",".join(strategies), "--sandbox", sandbox, "--seed", str(seed),
            "--repeats", str(repeats), "--runs", str(runs), "--work-dir", str(work), "--jobs", "1", "--json"]
    env = {**os.environ, "COLUMNS": "200"}
    start = time.monotonic()
    rc, output = run_capture(argv, GENERATE_TIMEOUT_S, cwd=ROOT, env=env)
    seconds = time.monotonic() - start
    last = output.strip().splitlines()[-1] if output.strip() else ""
    assert rc == 0 and last.startswith("{"), f"{' '.join(argv)} exited {rc}:\n{output[-4000:]}"
    summary: dict[str, Any] = json.loads(last)
    summary["wall_seconds"] = round(seconds, 2)
    return summary
