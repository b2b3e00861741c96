import sys, dataclasses
from pathlib import Path
from taskforge.dataset.reader import Dataset
from taskforge.core.settings import Settings
from taskforge.core.patches import diff
from taskforge.reward.reward import reward_many
from taskforge.reward.workspace import DatasetTrees
from sandboxes.local import LocalSandbox
REBUILD = '''import importlib.util as _u, os as _os, subprocess as _sp, sys as _sys, sysconfig as _sc, tempfile as _tf
_out = _os.path.join(_tf.mkdtemp(), "_cmsgpack" + _sc.get_config_var("EXT_SUFFIX"))
_sp.run(["gcc", "-shared", "-fPIC", "-O0", "-I" + _sc.get_paths()["include"], "-I" + _os.path.dirname(__file__), "-I" + _os.path.dirname(_os.path.dirname(__file__)),
         _os.path.join(_os.path.dirname(__file__), "_cmsgpack.c"), "-o", _out], check=True)
_spec = _u.spec_from_file_location("msgpack._cmsgpack", _out)
_m = _u.module_from_spec(_spec); _sys.modules["msgpack._cmsgpack"] = _m; _spec.loader.exec_module(_m)
'''
ds_dir = sys.argv[1]
ds = Dataset.open(ds_dir)
task = next(t for t in ds.tasks() if not t.env_spec.compiled_extensions)
repo = next(Path(ds_dir).glob("repos/*")) if (Path(ds_dir) / "repos").exists() else None
init_text = None
import tarfile, io
settings = dataclasses.replace(Settings.load({"sandbox": "local"}), monitor_zero=False)
trees = DatasetTrees(Path(ds_dir))
orig = Path("/tmp/pk/msgpack-1.2.4/msgpack/__init__.py").read_text()
attack = diff({"msgpack/__init__.py": orig}, {"msgpack/__init__.py": REBUILD + orig})
res = reward_many([(task, task.patch), (task, ""), (task, attack)], sandbox=LocalSandbox(settings), trees=trees, settings=settings)
for name, r in zip(["gold", "empty", "rebuild attack"], res):
    print(ds_dir, task.entities[0], name, r.score, r.fraction, sorted(str(getattr(f, "value", f)) for f in r.flags), (r.detail or "")[:150])
