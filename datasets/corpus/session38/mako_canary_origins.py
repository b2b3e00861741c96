import random, shutil, tempfile, sys
from pathlib import Path
from taskforge.dataset.reader import Dataset
from taskforge.reward.canaries import plant_canaries
from taskforge.core.test_homes import test_homes
ds = Dataset.open("/work/c38/wm/packages/mako/dataset")
repo = next(Path("/work/c38/wm/work/repos").glob("mako-*"))
tot = cls = 0
for t in ds.tasks():
    hidden = sorted({n.split("::")[0] for n in t.fail_to_pass})
    named = {n.split("::")[1] for n in t.fail_to_pass if n.count("::") >= 2}
    non_test = sorted(c for c in named if not c.startswith("Test"))
    hits = 0
    for seed in range(5):
        ws = Path(tempfile.mkdtemp()) / "ws"
        shutil.copytree(repo, ws)
        plan = plant_canaries(ws, hidden, pass_to_pass=t.pass_to_pass, fail_to_pass=t.fail_to_pass, rng=random.Random(seed))
        hits += sum(1 for o in plan.origins.values() if o and o[0].count("::") >= 2 and not o[0].split("::")[1].startswith("Test"))
        shutil.rmtree(ws.parent)
    print(t.entities[0], "non-Test* classes in F2P:", non_test[:3], "copies from them in 5 plantings:", hits)
