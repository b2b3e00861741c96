"""Idea 3 (the canary stable-text cache): are the canaries, the strict-equality name and the seal tokens drawn
afresh in every grading, or could an agent learn them across gradings (from the cached stable text)?

    python plan_stability.py DATASET_DIR TASK_INDEX [N]
"""
import sys
import tempfile
from pathlib import Path

from taskforge.dataset.reader import Dataset
from taskforge.reward import reward as R
from taskforge.reward.workspace import DatasetTrees

ds = Dataset.open(sys.argv[1])
trees = DatasetTrees(Path(sys.argv[1]))
task = list(ds.tasks())[int(sys.argv[2])]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 3
plans = []
for i in range(n):
    with tempfile.TemporaryDirectory() as tmp, R._ORIGINALS.use(trees, task) as orig:
        args, plan, flags, detail, ro, allowed, sealed = R._assemble(task, "", orig, Path(tmp) / "ws", None, seal=True)
        strict = next((a for a in args if a.startswith("-p")), "")
        plans.append((set(plan.expect), plan.plugin_module, set(sealed.sites)))
        print(i, "plugin", plan.plugin_module, "canaries", sorted(plan.expect)[:4], "tokens", sorted(sealed.sites))
common = set.intersection(*(p[0] for p in plans))
print("canary ids in every grading:", sorted(common))
print("tokens in every grading:", sorted(set.intersection(*(p[2] for p in plans))))
