"""Resolve an environment to exact pins, inside a throwaway container (stdlib only).

    python resolve_env.py request.json out.json

request: {"install_target": ".[tests]" | "", "requirements": [...], "project_name": "..."}; the
repository is the current directory. Writes {"pins": ["name==version", ...], "python_version": "3.11.2",
"project": {"name", "version", "requires_dist"}}: the project itself is never in "pins".
"""

import json
import os
import platform
import subprocess
import sys
import venv

request = json.load(open(sys.argv[1]))
env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
if os.path.getsize("/tf/ca.pem") > 0:
    env.update(PIP_CERT="/tf/ca.pem", SSL_CERT_FILE="/tf/ca.pem", REQUESTS_CA_BUNDLE="/tf/ca.pem")
venv.EnvBuilder(with_pip=True).create("/tf/venv")
targets = ([request["install_target"]] if request["install_target"] else []) + list(request["requirements"])
cmd = ["/tf/venv/bin/python", "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir",
       "--progress-bar", "off", "--report", "/tf/report.json", *targets]
print("+", " ".join(cmd), flush=True)
subprocess.run(cmd, env=env, check=True)
report = json.load(open("/tf/report.json"))


def canonical(name):
    return name.lower().replace("_", "-").replace(".", "-")


pins, project = [], {}
for item in report["install"]:
    meta = item["metadata"]
    url = item.get("download_info", {}).get("url", "")
    local = url.startswith("file://") and "dir_info" in item.get("download_info", {})
    if local or canonical(meta["name"]) == canonical(request["project_name"]):
        project = {"name": meta["name"], "version": meta["version"],
                   "requires_dist": meta.get("requires_dist", []), "requires_python": meta.get("requires_python", "")}
        continue
    pins.append(f"{meta['name']}=={meta['version']}")
json.dump({"pins": sorted(pins, key=str.lower), "python_version": platform.python_version(), "project": project},
          open(sys.argv[2], "w"))
print(f"resolved {len(pins)} pins; project: {project.get('name', '-')} {project.get('version', '')}")
