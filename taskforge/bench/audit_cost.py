"""``taskforge bench audit-cost`` / ``python -m taskforge.bench.audit_cost``: what the leak audit adds per task.

The task is real: ``inflection==0.5.1`` from PyPI (an sdist given with ``--sdist``, else downloaded
with pip into the work folder) with the body of ``inflection.camelize`` replaced by ``raise
NotImplementedError``, scrubbed as the pipeline does (fresh one-commit git). Timed, each ``--repeat``
times (median reported): fingerprinting, the workspace channel, the git channel, and the environment
channel over a virtualenv (``--env-dir``; default: the interpreter's own environment, ``sys.prefix``:
thousands of files of real third-party code, so it is also a false-positive check: it must find
nothing), and optionally an image (``--image TAG``, docker SDK): streamed each time, and through the
layer cache (the first audit extracts each layer, by diff id; later ones, of any image sharing it, reuse it).
"""

from __future__ import annotations

import ast
import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from taskforge.audit.audit import _git_hits, audit
from taskforge.audit.fingerprints import entity_sources_in_tree, fingerprint
from taskforge.audit.leak_scan import Scanner
from taskforge.audit.scrub import scrub_workspace
from taskforge.core import pyparse

QUALNAME = "inflection.camelize"
MODULE = "inflection/__init__.py"


def _download(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob("inflection-0.5.1.tar.gz"))
    if found:
        return found[0]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", "-d",
                    str(dest), "inflection==0.5.1"], check=True, timeout=300, start_new_session=True)
    return next(dest.glob("inflection-0.5.1.tar.gz"))


def build_task(sdist: Path, tmp: Path) -> tuple[Path, Path, dict[str, str], str]:
    """(original, scrubbed workspace, deleted sources, problem statement) for camelize."""
    with tarfile.open(sdist) as tf:
        tf.extractall(tmp, filter="data")
    original = tmp / "inflection-0.5.1"
    workspace = tmp / "workspace"
    shutil.copytree(original, workspace)
    deleted = entity_sources_in_tree(original, [QUALNAME])
    text = (original / MODULE).read_text()
    fn = next(n for n in pyparse.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "camelize")
    lines = text.splitlines(keepends=True)
    first_body = fn.body[1].lineno  # body[0] is the docstring
    broken = "".join(lines[: first_body - 1]) + "    raise NotImplementedError\n" + "".join(lines[fn.end_lineno:])
    (workspace / MODULE).write_text(broken)
    scrub_workspace(workspace, [QUALNAME])
    problem = f"Implement `{QUALNAME}`: {lines[fn.lineno - 1].strip()}\n{ast.get_docstring(fn)}"
    return original, workspace, deleted, problem


def measure(sdist: Path, env_dir: Path | None, image: str | None, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="taskforge-audit-bench-") as tmp:
        _original, workspace, deleted, problem = build_task(sdist, Path(tmp))
        times: dict[str, list[float]] = {"fingerprint": [], "workspace": [], "git": [], "environment": [],
                                          "image": [], "image_cached_first": [], "image_cached": []}
        hits: dict[str, int] = {}
        files = {"environment": sum(1 for p in env_dir.rglob("*") if p.is_file()) if env_dir else 0,
                 "workspace": sum(1 for p in workspace.rglob("*") if p.is_file() and ".git" not in p.parts)}
        for _ in range(repeat):
            t0 = time.perf_counter()
            remaining = [p.read_bytes() for p in workspace.rglob("*.py") if ".git" not in p.parts]
            fps = fingerprint(deleted, remaining, [problem])
            times["fingerprint"].append(time.perf_counter() - t0)
            ws = audit(workspace, fps, git=False)
            times["workspace"].append(ws.seconds)
            t0 = time.perf_counter()
            git_hits = list(_git_hits(workspace, Scanner(fps)))
            times["git"].append(time.perf_counter() - t0)
            hits["workspace+git"] = len(ws.hits) + len(git_hits)
            if env_dir is not None:
                env = audit(None, fps, env_dir=env_dir)
                times["environment"].append(env.seconds)
                hits["environment"] = len(env.hits)
                if env.hits:
                    hits["environment_examples"] = [h.path for h in env.hits[:5]]  # type: ignore[assignment]
            if image:
                img = audit(None, fps, image=image)  # streamed through image.save() every time
                times["image"].append(img.seconds)
                cached = audit(None, fps, image=image, image_cache=Path(tmp) / "image-cache")
                times["image_cached" if times["image_cached_first"] else "image_cached_first"].append(
                    cached.seconds)
                hits["image"] = len(img.hits) + len(cached.hits)
    median = {k: round(statistics.median(v), 3) for k, v in times.items() if v}
    per_task = round(sum(median.get(k, 0.0) for k in ("fingerprint", "workspace", "git")), 3)
    return {"task": f"pypi:inflection==0.5.1 {QUALNAME}", "fingerprints": len(fps), "repeat": repeat,
            "seconds_median": median, "per_task_workspace_git_s": per_task,
            "per_task_with_env_s": round(per_task + median.get("environment", 0.0), 3),
            "files": files, "env_dir": str(env_dir) if env_dir else None, "hits": hits}


def audit_cost(
    env_dir: Annotated[Path | None, typer.Option(help="Virtualenv to search (default: sys.prefix).")] = None,
    sdist: Annotated[Path | None, typer.Option(help="inflection-0.5.1.tar.gz (default: pip download).")] = None,
    image: Annotated[str | None, typer.Option(help="Also time the image channel on this image tag.")] = None,
    repeat: Annotated[int, typer.Option(min=1, help="Runs per measurement (median reported).")] = 3,
    work_dir: Annotated[Path | None, typer.Option(help="Where the sdist is downloaded "
                                                  "(default: ~/.cache/taskforge/bench).")] = None,
) -> None:
    """Time the leak audit per channel on a real task; print one JSON object."""
    where = work_dir or Path.home() / ".cache" / "taskforge" / "bench"
    result = measure(sdist or _download(where), env_dir or Path(sys.prefix), image, repeat)
    print(json.dumps(result, indent=2), flush=True)


def register(bench_app: typer.Typer) -> None:
    bench_app.command("audit-cost")(audit_cost)


if __name__ == "__main__":
    typer.run(audit_cost)
