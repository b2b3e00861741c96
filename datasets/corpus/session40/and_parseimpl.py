"""Re-validate pyparsing 3.3.3's And.parseImpl stub on the current code (order-dependent hidden tests)."""
import json, sys, time
from pathlib import Path
from generators.candidates import propose
from generators.registry import all_strategies
from taskforge.core.settings import Settings
from taskforge.pipeline.generate import ProfileJob, profile_source, load_profile
from taskforge.validate.steps import CandidateJob, validate_candidate

work = sys.argv[1]
settings = Settings.load({"work_dir": work})
t = time.monotonic()
prof = profile_source(ProfileJob("pypi:pyparsing==3.3.3", settings.to_dict()))
print("profile", round(time.monotonic() - t), "s", prof.error if hasattr(prof, "error") else "", flush=True)
p = load_profile(prof.profile_dir)
cands, _ = propose(p, [all_strategies()["stub"]], 0)
c = next(c for c in cands if c.entity == "pyparsing.core.And.parseImpl")
t = time.monotonic()
res = validate_candidate(CandidateJob(prof.profile_dir, c, settings.to_dict()))
print("validate", round(time.monotonic() - t), "s", flush=True)
if res.task is None:
    print("rejected", res.rejected)
else:
    task = res.task
    print("accepted", len(task.fail_to_pass), "F2P;", "order_dependent:", task.provenance.get("order_dependent"),
          "forge_chance", task.provenance.get("forge_chance"), "canary", task.provenance.get("canary_forge_chance"))
