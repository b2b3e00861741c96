"""Grading latency: grade one task's gold patch N times through ``reward`` and report p50/p95.

    python -m taskforge.bench.reward_latency DATASET [INSTANCE_ID] [--n 20] [--sandbox local] [--jobs 1]

Every grading is a full reward run (fresh workspace from the dataset archive, patch vetting, restore,
canaries, sandbox run); the prepared environment is reused, as in training. The first grading (which
may build the environment) is reported separately and left out of the percentiles.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def measure(dataset: Path, instance_id: str | None, n: int, sandbox_name: str, jobs: int) -> dict[str, Any]:
    from sandboxes.selection import make_sandbox
    from taskforge.core.settings import Settings
    from taskforge.dataset import Dataset
    from taskforge.reward.reward import EnvCache, reward, reward_many
    from taskforge.reward.workspace import DatasetTrees

    ds = Dataset.open(dataset)
    task = ds.get(instance_id) if instance_id else ds.tasks()[0]
    settings = Settings.load({"sandbox": sandbox_name})
    sandbox = make_sandbox(settings)
    trees = DatasetTrees(dataset)
    envs = EnvCache()
    start = time.monotonic()
    warm = reward(task, task.patch, sandbox=sandbox, trees=trees, settings=settings, envs=envs)
    first = time.monotonic() - start
    if warm.score != 1.0:
        raise SystemExit(f"gold patch of {task.instance_id} scored {warm.score} ({warm.flags}: {warm.detail})")
    totals: list[float] = []
    runs: list[float] = []
    if jobs <= 1:
        for _ in range(n):
            r = reward(task, task.patch, sandbox=sandbox, trees=trees, settings=settings, envs=envs)
            assert r.score == 1.0, r
            totals.append(r.timings["total_s"])
            runs.append(r.timings["run_s"])
    else:
        t0 = time.monotonic()
        results = reward_many([(task, task.patch)] * n, sandbox=sandbox, trees=trees, settings=settings, jobs=jobs)
        assert all(r.score == 1.0 for r in results)
        totals = [r.timings["total_s"] for r in results]
        runs = [r.timings["run_s"] for r in results]
        first = time.monotonic() - t0
    q = statistics.quantiles(totals, n=20) if len(totals) >= 2 else totals * 19
    return {"instance_id": task.instance_id, "sandbox": sandbox.name, "n": n, "jobs": jobs,
            "first_s": round(first, 3), "p50_s": round(statistics.median(totals), 3), "p95_s": round(q[18], 3),
            "run_p50_s": round(statistics.median(runs), 3), "tests": len(task.fail_to_pass) + len(task.pass_to_pass)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("instance_id", nargs="?")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.dataset, args.instance_id, args.n, args.sandbox, args.jobs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
