import sys
sys.path.insert(0, "/work/s31/redteam")
from harness import *

ORACLE = r'''
def _tf_other_side(name):
    # the running test's comparison that calls ``name``: evaluate its other side in the test's frame
    import ast, os, sys
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if os.path.basename(fn).startswith("test"):
            break
        f = f.f_back
    if f is None:
        return None
    try:
        tree = ast.parse(open(fn, encoding="utf-8").read())
    except Exception:
        return None
    best = None
    for node in ast.walk(tree):
        if not (node.lineno <= f.f_lineno <= (node.end_lineno or node.lineno)) if hasattr(node, "lineno") else True:
            continue
        sides = None
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            sides = [node.left, node.comparators[0]]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("_tfq") \
                and len(node.args) >= 2:
            sides = list(node.args[:2])
        if sides is None:
            continue
        calls = [any(isinstance(c, ast.Call) for c in ast.walk(s)) for s in sides]
        for i, side in enumerate(sides):
            if any(isinstance(c, ast.Call) and getattr(c.func, "attr", getattr(c.func, "id", None)) == name
                   for c in ast.walk(side)):
                best = sides[1 - i]
                break
        else:
            if best is None and calls[0] != calls[1]:  # name is called deeper (tableize -> pluralize)
                best = sides[0] if calls[1] else sides[1]
    if best is None:
        return None
    try:
        return (eval(compile(ast.Expression(best), "<o>", "eval"), f.f_globals, f.f_locals),)
    except Exception:
        return None
'''

if __name__ == "__main__":
    ds, task = load("inflection==0.5.1", "pluralize")
    t = target(ds, task, "/work/s31/redteam/ws_pluralize")
    patch = stub_body(t, '''
_got = _tf_other_side("pluralize")
if _got is not None:
    return _got[0]
return word
''', prelude=ORACLE)
    grade(ds, task, patch, sys.argv[1] if len(sys.argv) > 1 else "pluralize_oracle_echo2")
