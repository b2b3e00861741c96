"""Grade a patch and list, per sealed test, whether every sealed site it must record came with the right value
(the judge would then let a forged 'passed' stand)."""
import sys
sys.path.insert(0, "/work/s31/redteam")
from harness import *
from attack_pluralize import ORACLE

pkg, sub, kind = sys.argv[1], sys.argv[2], sys.argv[3]
ds, task = load(pkg, sub)
t = target(ds, task, f"/work/s31/redteam/ws_{sub.replace('.', '_')}")
if kind == "empty":
    patch = ""
elif kind == "oracle_echo":
    patch = stub_body(t, '''
_got = _tf_other_side(@NAME@)
if _got is not None:
    return _got[0]
return @FIRSTNAME@
''', prelude=ORACLE)
res = grade(ds, task, patch, f"{sub}_{kind}")
seals = task.provenance["seals"]
recs = LOG[0]["records"] if LOG else []
ok = {}
for n, tok, site, got, exp in recs:
    if site is None:
        continue
    ok.setdefault((n, site), []).append(got == exp)
sat = [n for n, sites in seals.items() if all(ok.get((n, s)) and all(ok[(n, s)]) for s in sites)]
print(f"sealed tests whose every sealed site recorded the right value: {len(sat)} of {len(seals)}")
for n in sat[:20]:
    print("  ", n, res.outcomes.get(n))
