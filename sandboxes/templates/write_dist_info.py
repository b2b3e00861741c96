"""Write a source-free ``.dist-info`` of the project into the environment (stdlib only).

    python write_dist_info.py project.json

So that ``importlib.metadata.version(project)`` answers as in an installed checkout, while the
project's code comes only from the per-run workspace (on PYTHONPATH). Holds name, version and
dependency metadata: no module, no file list, no description.
"""

import json
import re
import sys
import sysconfig
from pathlib import Path

project = json.load(open(sys.argv[1]))
if project.get("name"):
    purelib = Path(sysconfig.get_paths()["purelib"])
    name = re.sub(r"[-_.]+", "_", project["name"])
    info = purelib / f"{name}-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if project.get("requires_python"):
        lines.append(f"Requires-Python: {project['requires_python']}")
    lines += [f"Requires-Dist: {r}" for r in project.get("requires_dist", [])]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "INSTALLER").write_text("taskforge\n")
    (info / "RECORD").write_text("")
    print(f"wrote {info}")
