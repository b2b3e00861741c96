"""Copy the project's source-free ``.dist-info`` into the environment's site-packages (stdlib only).

    python install_dist_info.py DIST_INFO_DIR [EXT_DIR FINDER_DIR [STARTUP_DIR]]

So that ``importlib.metadata`` (version, entry points) answers as in an installed checkout, while the
project's code comes only from the per-run workspace (on PYTHONPATH). The folder was cut down by
``resolve_env.py``: metadata files only, ``RECORD`` listing nothing else.

EXT_DIR (when it exists) holds the project's compiled extension modules that ``sandboxes.extensions``
keeps (built from native sources, never from Python); they go to ``<venv>/taskforge-ext`` and
FINDER_DIR's ``_taskforge_ext.py`` + ``.pth`` into site-packages, which serve them to the tests.

STARTUP_DIR's files (``sandboxes.startup_hooks``: a module and its ``.pth``) always go into site-packages.
"""

import os
import shutil
import sys
import sysconfig

source = sys.argv[1]
purelib = sysconfig.get_paths()["purelib"]
for entry in sorted(os.listdir(source)) if os.path.isdir(source) else []:
    if entry.endswith(".dist-info"):
        shutil.copytree(os.path.join(source, entry), os.path.join(purelib, entry), dirs_exist_ok=True)
        print(f"installed {entry} (metadata only)")
if len(sys.argv) > 3 and os.path.isdir(sys.argv[2]) and os.listdir(sys.argv[2]):
    shutil.copytree(sys.argv[2], os.path.join(sys.prefix, "taskforge-ext"), dirs_exist_ok=True)
    for entry in sorted(os.listdir(sys.argv[3])):
        shutil.copyfile(os.path.join(sys.argv[3], entry), os.path.join(purelib, entry))
    print(f"installed the compiled extension modules of {sys.argv[2]}")
if len(sys.argv) > 4 and os.path.isdir(sys.argv[4]):
    for entry in sorted(os.listdir(sys.argv[4])):
        shutil.copyfile(os.path.join(sys.argv[4], entry), os.path.join(purelib, entry))
        print(f"installed the start-up hook {entry}")
