"""Copy the project's source-free ``.dist-info`` into the environment's site-packages (stdlib only).

    python install_dist_info.py DIST_INFO_DIR

So that ``importlib.metadata`` (version, entry points) answers as in an installed checkout, while the
project's code comes only from the per-run workspace (on PYTHONPATH). The folder was cut down by
``resolve_env.py``: metadata files only, ``RECORD`` listing nothing else.
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
