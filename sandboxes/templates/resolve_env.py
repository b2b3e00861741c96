"""Resolve an environment to exact pins, inside a throwaway container (stdlib only).

    python resolve_env.py request.json out.json

request: {"install_target": ".[tests]" | "", "requirements": [...], "project_name": "..."}; the
repository is the current directory. Writes {"pins": ["name==version", ...], "python_version": "3.11.2",
"project": {"name", "version"}, "requires": {name: [Requires-Dist, ...]}}: the project itself is never in
"pins"; "requires" covers it too (the host reads the test runner's own dependencies from it). When there is an install target,
the project is also installed (without dependencies) into this throwaway venv, and its ``.dist-info``
alone (``RECORD`` cut down to the metadata, no module) is left in /tf/out/dist-info for the image.
When that install fails (a C extension and no compiler in the image), "project" says so
("install_failed") and the host takes the metadata from its own build of the project.
"""

import csv
import json
import os
import platform
import shutil
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


pins, project, requires = [], {}, {}
for item in report["install"]:
    meta = item["metadata"]
    requires[canonical(meta["name"])] = list(meta.get("requires_dist") or [])
    url = item.get("download_info", {}).get("url", "")
    local = url.startswith("file://") and "dir_info" in item.get("download_info", {})
    if local or canonical(meta["name"]) == canonical(request["project_name"]):
        project = {"name": meta["name"], "version": meta["version"]}
        continue
    pins.append(f"{meta['name']}=={meta['version']}")
os.makedirs("/tf/out/dist-info", exist_ok=True)
if project and request["install_target"]:
    cmd = ["/tf/venv/bin/python", "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--progress-bar", "off",
           request["install_target"]]
    print("+", " ".join(cmd), flush=True)
    if subprocess.run(cmd, env=env).returncode != 0:
        # e.g. a C extension and no compiler in this image: the host may hold the metadata (its own build)
        project["install_failed"] = "pip install --no-deps of the project failed in the resolve container"
        print("the project does not build here; the host supplies its metadata if it built it", flush=True)
    site = subprocess.run(["/tf/venv/bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    for entry in sorted(os.listdir(site)):
        if entry.endswith(".dist-info") and canonical(entry[:-10].rsplit("-", 1)[0]) == canonical(project["name"]):
            shutil.copytree(os.path.join(site, entry), os.path.join("/tf/out/dist-info", entry))
            record = os.path.join("/tf/out/dist-info", entry, "RECORD")
            rows = list(csv.reader(open(record))) if os.path.exists(record) else []
            with open(record, "w", newline="") as fh:
                csv.writer(fh, lineterminator="\n").writerows(r for r in rows if r and r[0].startswith(entry + "/"))
            for leftover in os.listdir(os.path.join("/tf/out/dist-info", entry)):
                if leftover == "direct_url.json":  # names the build path, nothing the tests need
                    os.unlink(os.path.join("/tf/out/dist-info", entry, leftover))
json.dump({"pins": sorted(pins, key=str.lower), "python_version": platform.python_version(), "project": project,
           "requires": requires}, open(sys.argv[2], "w"))
print(f"resolved {len(pins)} pins; project: {project.get('name', '-')} {project.get('version', '')}")
