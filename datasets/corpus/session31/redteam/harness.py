import sys, json, tempfile, time, collections
from pathlib import Path
sys.path.insert(0, "/work/main/tests")
from generated_datasets import generated_dataset
from test_redteam_hacks import _sandbox
from redteam_hacks import Target, stub_body, append_impl, diff
from taskforge.core.settings import Settings
from taskforge.reward import seals as _seals
from taskforge.reward.reward import reward

LOG = []
_orig_judge = _seals.SealPlan.judge
def judge(self, outcomes, records):
    records = list(records)
    LOG.append({"records": [(n, t, self.sites[t].site if t in self.sites else None, _seals.decode(v),
                             self.sites[t].expected if t in self.sites else None) for n, t, v in records]})
    return _orig_judge(self, outcomes, records)
_seals.SealPlan.judge = judge

def load(pkg, sub):
    ds = generated_dataset(pkg)
    task = next(t for t in ds.tasks() if sub in t.instance_id)
    return ds, task

def target(ds, task, where):
    return Target.from_task(task, ds.trees, Path(where))

def grade(ds, task, patch, name, outdir="/work/s31/redteam/out"):
    Path(outdir).mkdir(parents=True, exist_ok=True)
    Path(outdir, name + ".patch").write_text(patch)
    LOG.clear()
    t0 = time.time()
    res = reward(task, patch, sandbox=_sandbox("local"), trees=ds.trees,
                 settings=Settings.load({"sandbox": "local", "monitor_zero": False}))
    bad = {n: o for n, o in res.outcomes.items() if o != "passed"}
    summary = {"name": name, "score": res.score, "fraction": res.fraction, "p2p": res.pass_to_pass_fraction,
               "flags": [str(f) for f in res.flags], "detail": res.detail, "n_bad": len(bad),
               "bad": dict(list(bad.items())[:8]), "secs": round(time.time() - t0, 1), "findings": [f"{f.rule} {f.path}:{f.line}" for f in (res.findings or ())]}
    print(json.dumps(summary, indent=1, default=str))
    if LOG:
        recs = LOG[0]["records"]
        wrong = [r for r in recs if r[2] and r[3] != r[4]]
        print("seal records:", len(recs), "wrong:", len(wrong))
        for r in wrong[:6]:
            print("  WRONG", r)
    Path(outdir, name + ".json").write_text(json.dumps({**summary, "outcomes": res.outcomes,
                                                        "seal_log": LOG}, default=repr, indent=1))
    return res
