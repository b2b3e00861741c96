"""Parent-side cost of one grading's sealing and canary planting on a dataset's tasks (3 tasks x 3 gradings).

    python datasets/corpus/session39/plant_time.py DATASET_DIR

Run with PYTHONPATH=<a worktree at another commit> to compare codes (session 39: 7493f5b against the final code).
"""
import sys, time, secrets, random, tempfile, shutil
from pathlib import Path
from taskforge.dataset.reader import Dataset
from taskforge.reward import canaries
from taskforge.reward.seals import plan_for
from taskforge.reward.strict_asserts import strict_source
from taskforge.core.test_homes import test_homes
import inspect
ds = Dataset.open(sys.argv[1])
tasks = [t for t in ds.tasks()][:3]
has_tokens = "tokens" in inspect.signature(canaries.plant_canaries).parameters
tmp = Path(tempfile.mkdtemp())
for ti, task in enumerate(tasks):
    ws0 = ds.extract_original(task, tmp / f"orig{ti}")
    homes = test_homes(ws0, task.fail_to_pass)
    hidden = sorted(f for f in {n.split("::")[0] for n in homes.homes(task.fail_to_pass)} if (ws0 / f).is_file())
    originals = {rel: (ws0 / rel).read_text() for rel in hidden}
    seals = task.provenance.get("seals")
    for g in range(3):
        ws = tmp / f"ws{ti}-{g}"; shutil.copytree(ws0, ws)
        strict = f"_tfq{secrets.token_hex(5)}"; seal_name = f"_tfs{secrets.token_hex(5)}"
        t0 = time.perf_counter()
        texts, sealed = plan_for(originals, homes.homes(task.fail_to_pass), seals, seal_name, transform=lambda t: strict_source(t, strict)) if seals else ({}, None)
        for rel in hidden:
            (ws / rel).write_text(texts[rel] if rel in texts else strict_source(originals[rel], strict))
        t1 = time.perf_counter()
        kw = {"tokens": tuple(sealed.sites)} if (has_tokens and sealed) else {}
        canaries.plant_canaries(ws, hidden, pass_to_pass=task.pass_to_pass, fail_to_pass=task.fail_to_pass,
                                strict_eq=strict, seal=seal_name if sealed and sealed.sites else "", rng=random.Random(g), **kw)
        t2 = time.perf_counter()
        print(task.instance_id[:50], g, "seal+strict %.2fs" % (t1-t0), "plant %.2fs" % (t2-t1), flush=True)
