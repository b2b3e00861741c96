"""Run session 40's red-team harness with the docker sandbox in place of the local one (same arguments)."""
import runpy
import sys
from pathlib import Path

import sandboxes.local
from sandboxes.docker import DockerSandbox

sandboxes.local.LocalSandbox = DockerSandbox  # the harness imports this name
sys.path.insert(0, str(Path(__file__).resolve().parent))
runpy.run_path(str(Path(__file__).resolve().parents[2] / "session40" / "redteam" / "harness.py"), run_name="__main__")
