"""Real packages for the realrepo tests: a private copy of a PyPI sdist, and what plain pytest collects in it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def sdist_copy(tmp_path_factory: pytest.TempPathFactory, dest: Path, source: str) -> Path:
    """A copy at ``dest`` of ``source`` (``pypi:NAME==VER``), downloaded once per test session."""
    from generators.sources import resolve_source

    work = tmp_path_factory.getbasetemp() / "tf-shared-work"
    work.mkdir(exist_ok=True)
    shutil.copytree(resolve_source(source, work).path, dest)
    return dest


def collected(repo: Path, *args: str) -> tuple[set[str], str]:
    """The node ids plain pytest collects in ``repo`` from ``args`` (addopts off), and the end of its output."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-p", "no:randomly", "-o", "addopts=", *args], cwd=repo, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"})
    return {ln.strip() for ln in out.stdout.splitlines() if "::" in ln}, out.stdout[-2000:]
